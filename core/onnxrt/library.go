package onnxrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LibraryEnv is the environment variable naming the ORT shared library.
const LibraryEnv = "ORT_LIB_PATH"

// FetchedLibrary is where `make ort` puts the library, relative to the
// repository root.
const FetchedLibrary = "third_party/onnxruntime/libonnxruntime.so.1"

// errNoLibrary names every way to provide the library, on one line, because
// it is the first thing a new user sees.
var errNoLibrary = errors.New("ONNX Runtime shared library not found: pass " +
	"--backend-config=onnxruntime,library-path=<libonnxruntime.so>, set " + LibraryEnv +
	", or run `make ort` to fetch " + FetchedLibrary)

// FindLibrary is Locate with ORT_LIB_PATH read from the process
// environment: the entry of New and of test harnesses, which configure the
// library by that variable. The binary reads its environment once and
// calls Locate (cmd/inferd env.go).
func FindLibrary(explicit string) (string, error) {
	return Locate(explicit, os.Getenv(LibraryEnv))
}

// Locate locates the ORT shared library. The first of these wins:
// explicit (from --backend-config=onnxruntime,library-path=...), fromEnv
// (the ORT_LIB_PATH environment variable's value), then FetchedLibrary
// looked up beside the executable and in its parent directories, then from
// the working directory upward. A path given explicitly or by the variable
// must exist: a typo there should not silently fall through to another
// copy.
func Locate(explicit, fromEnv string) (string, error) {
	if explicit != "" {
		return existing(explicit, "library-path")
	}
	if fromEnv != "" {
		return existing(fromEnv, LibraryEnv)
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		if p, ok := searchUp(dir); ok {
			return p, nil
		}
	}
	return "", errNoLibrary
}

func existing(path, source string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("ONNX Runtime library %s=%s: %w", source, path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("ONNX Runtime library %s=%s: %w", source, path, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("ONNX Runtime library %s=%s is a directory, want the libonnxruntime.so file", source, path)
	}
	return abs, nil
}

// searchUp looks for FetchedLibrary under dir and each of its parents.
func searchUp(dir string) (string, bool) {
	for {
		p := filepath.Join(dir, FetchedLibrary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
