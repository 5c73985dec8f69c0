// Package modelfile opens the files a model configuration names (an
// initial state's data_file, a warmup input_data_file, a label_filename,
// default_model_filename, ...) inside the folder Triton resolves them in,
// the model's or the version's. A name may not leave that folder: not as
// an absolute path, not through "..", and not through a symbolic link,
// which is why every open goes through an os.Root of the folder. Only
// regular files are read, never more than the caller's bound, and a FIFO
// or a device never blocks the open.
//
// The rules, and the fields a load override may or may not name, are in
// docs/repositories.md, "Paths a config may name".
package modelfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxAllocBytes bounds one buffer that a model configuration makes the
// server allocate or read (a sequence state's initial or zero data, a
// warmup sample, a label file): a config of a few hundred bytes must not
// take the machine's memory. Triton has no such bound; it tries the
// allocation. 1 GiB is far above what these buffers hold in practice.
const MaxAllocBytes int64 = 1 << 30

// Reason is a failure that completes a sentence about a config field:
// "<field> '<path>' <reason>" (FieldError).
type Reason string

func (r Reason) Error() string { return string(r) }

var (
	// ErrOutside: the name leaves its folder (absolute, "..", or a
	// symbolic link whose target lies outside).
	ErrOutside error = Reason("names a path outside the model directory")
	// ErrNotRegular: the name is a device, a FIFO, a socket or a folder
	// where a file is read.
	ErrNotRegular error = Reason("is not a regular file")
	// ErrTooLarge: the file is larger than the reader's bound.
	ErrTooLarge error = Reason("is larger than this server's limit")
)

// Resolve checks that name, relative to dir, stays inside dir once every
// symbolic link on the way is followed, and returns dir joined with name
// and what it names (a file or a folder). It is for paths handed to
// others (ONNX Runtime, the Python worker), which open them by name; the
// folder is trusted not to change between this check and that open (only
// the repository's owner writes it).
func Resolve(dir, name string) (string, fs.FileInfo, error) {
	f, err := open(dir, name)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, filepath.FromSlash(name)), st, nil
}

// Locate is Resolve for a model's own file as the repository lays it out:
// name must lie inside dir as written (not absolute, no ".." out of it),
// but a symbolic link on the way is followed wherever it leads, as Triton
// does (repositories share a model.py or model.onnx between models so).
// What a load override names that the repository's config does not goes
// through Resolve as well (core's checkOverride). Locate only stats: a
// FIFO does not block it.
func Locate(dir, name string) (string, fs.FileInfo, error) {
	rel, ok := Local(dir, filepath.FromSlash(name))
	if name == "" || filepath.IsAbs(name) || !ok {
		return "", nil, ErrOutside
	}
	p := filepath.Join(dir, rel)
	st, err := os.Stat(p)
	if err != nil {
		return "", nil, err
	}
	return p, st, nil
}

// LocateFile is Locate for a file the backend hands on by its path: a
// folder is fs.ErrNotExist, anything else but a regular file
// ErrNotRegular.
func LocateFile(dir, name string) (string, error) {
	p, st, err := Locate(dir, name)
	switch {
	case err != nil:
		return "", err
	case st.IsDir():
		return "", fs.ErrNotExist
	case !st.Mode().IsRegular():
		return "", ErrNotRegular
	}
	return p, nil
}

// Open opens the regular file name inside dir for reading and returns it
// with its Stat, taken from the open file (so the size is the one of what
// will be read).
func Open(dir, name string) (*os.File, fs.FileInfo, error) {
	f, err := open(dir, name)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadHead reads the first min(n, size) bytes of the regular file name
// inside dir, and returns them with the file's size as Stat gave it before
// the read. A file of size 0 (as /proc files report) is not read at all.
func ReadHead(dir, name string, n int64) ([]byte, int64, error) {
	f, st, err := Open(dir, name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size := st.Size()
	want := max(0, min(n, size))
	data := make([]byte, want)
	if _, err := io.ReadFull(f, data); err != nil {
		// The file shrank after Stat.
		return nil, size, fmt.Errorf("read %s: %w", name, err)
	}
	return data, size, nil
}

// ReadFile reads the whole regular file name inside dir, which may not be
// larger than limit bytes (ErrTooLarge, before anything is read).
func ReadFile(dir, name string, limit int64) ([]byte, error) {
	data, size, err := ReadHead(dir, name, limit)
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, size, limit)
	}
	return data, nil
}

// Local returns p relative to dir when it lies inside dir: a relative p is
// taken as relative to dir, an absolute one must start with dir. It is
// lexical only; Resolve then follows the links.
func Local(dir, p string) (string, bool) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return "", false
		}
		p = rel
	}
	p = filepath.Clean(p)
	return p, filepath.IsLocal(p)
}

// Sub is name inside the sub-folder sub of a model folder (Triton's
// initial_state and warmup folders), for Resolve, Open and the readers.
// An absolute name is ErrOutside, not a name under sub.
func Sub(sub, name string) (string, error) {
	if filepath.IsAbs(name) || strings.HasPrefix(name, "/") {
		return "", ErrOutside
	}
	return sub + "/" + name, nil
}

// ModelDirVar is the variable Triton's Python backend replaces with the
// model's folder in EXECUTION_ENV_PATH (triton-inference-server/
// python_backend README.md, "Creating Custom Execution Environments").
const ModelDirVar = "$$TRITON_MODEL_DIRECTORY"

// ExpandModelDir replaces ModelDirVar in p with modelDir.
func ExpandModelDir(p, modelDir string) string {
	return strings.ReplaceAll(p, ModelDirVar, modelDir)
}

// open opens name inside dir read-only and without blocking: opening a
// FIFO for reading would otherwise wait for a writer. Reads of a regular
// file do not heed O_NONBLOCK.
func open(dir, name string) (*os.File, error) {
	rel, ok := Local(dir, filepath.FromSlash(name))
	if name == "" || filepath.IsAbs(name) || !ok {
		return nil, ErrOutside
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, classify(err)
	}
	return f, nil
}

// classify maps os.Root's refusal of a path that escapes (through a
// symbolic link; lexical escapes are caught before) to ErrOutside. os
// exports no sentinel for it, only its text.
func classify(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
		return ErrOutside
	}
	return err
}

// FieldError is a failure to use a path that a config field names. Its
// message names both, Triton-style: "<field> '<path>' names a path
// outside the model directory".
type FieldError struct {
	Field, Path string
	Err         error
}

func (e *FieldError) Error() string {
	var r Reason
	if errors.As(e.Err, &r) {
		return fmt.Sprintf("%s '%s' %v", e.Field, e.Path, e.Err)
	}
	return fmt.Sprintf("%s '%s': %v", e.Field, e.Path, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }
