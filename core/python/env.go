package python

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
)

// unpacked is a conda-pack archive extracted for EXECUTION_ENV_PATH.
type unpacked struct {
	dir     string
	modTime time.Time
}

// unpack extracts a packed environment once per archive path (again when
// the archive changes) into a private folder removed on Close, and returns
// that folder (python-backend.md §8.2).
func (b *Backend) unpack(archive string) (string, error) {
	abs, err := filepath.Abs(archive)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", core.Errorf(core.CodeInternal, "EXECUTION_ENV_PATH: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, ok := b.packs[abs]; ok && u.modTime.Equal(st.ModTime()) {
		return u.dir, nil
	}
	base, err := b.shimDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, "env-")
	if err != nil {
		return "", err
	}
	if err := extract(abs, dir); err != nil {
		os.RemoveAll(dir)
		return "", core.Errorf(core.CodeInternal, "EXECUTION_ENV_PATH: unpack %s: %v", archive, err)
	}
	b.packs[abs] = unpacked{dir: dir, modTime: st.ModTime()}
	return dir, nil
}

// extract unpacks a .tar.gz into dir; no entry may leave it.
func extract(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) && target != filepath.Clean(dir) {
			return fmt.Errorf("entry %q leaves the archive's folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}
