package python

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
)

// maxUnpackedBytes caps what one EXECUTION_ENV_PATH archive may unpack to
// (the sum of its files' sizes): a conda-pack environment with a large
// framework is a few GiB; a small archive that inflates past this is
// refused rather than allowed to fill the disk.
const maxUnpackedBytes = 64 << 30

// maxLinkHops bounds the links followed while resolving one link target
// (as the kernel's ELOOP limit does).
const maxLinkHops = 40

// unpacked is a conda-pack archive being, or having been, extracted for
// EXECUTION_ENV_PATH. The backend's map holds it under Backend.mu only for
// the lookup: the extraction runs without the lock, and a second load of
// the same archive waits on done instead of extracting again.
type unpacked struct{ *pack }

type pack struct {
	modTime time.Time
	done    chan struct{} // closed when dir and err are set
	dir     string
	err     error
}

// unpack extracts a packed environment once per archive path (again when
// the archive changes) into a private folder removed on Close, and returns
// that folder. Only the first caller for an archive extracts it; the
// backend's lock is not held meanwhile, so other models load.
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
	u, ok := b.packs[abs]
	if ok && u.modTime.Equal(st.ModTime()) {
		b.mu.Unlock()
		<-u.done
		return u.dir, u.err
	}
	u = unpacked{&pack{modTime: st.ModTime(), done: make(chan struct{})}}
	b.packs[abs] = u
	b.mu.Unlock()

	u.dir, u.err = b.extractPack(abs, archive)
	if u.err != nil {
		// A failed extraction is not remembered: the next load tries again.
		b.mu.Lock()
		if b.packs[abs].pack == u.pack {
			delete(b.packs, abs)
		}
		b.mu.Unlock()
	}
	close(u.done)
	return u.dir, u.err
}

// extractPack unpacks the archive into a fresh folder under the shim's.
func (b *Backend) extractPack(abs, archive string) (string, error) {
	base, err := b.shimDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, "env-")
	if err != nil {
		return "", err
	}
	if err := extract(abs, dir, maxUnpackedBytes); err != nil {
		os.RemoveAll(dir)
		return "", core.Errorf(core.CodeInternal, "EXECUTION_ENV_PATH: unpack %s: %v", archive, err)
	}
	return dir, nil
}

// errUnpackTooLarge: the archive unpacks to more than its cap.
var errUnpackTooLarge = errors.New("unpacks to more than the size cap")

// extract unpacks a .tar.gz into dir, writing at most limit bytes of file
// data. No entry may leave dir: every file is created through an os.Root
// of dir; names that are absolute or climb out with "..", entries under a
// symbolic link of the archive, and links whose target resolves outside
// dir (absolute targets included) are refused. Symbolic links are created
// last, once every link of the archive is known, so that no later entry
// can be written through one; hard links must name a regular file the
// archive already holds.
func extract(archive, dir string, limit int64) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(gz)
	links := map[string]string{} // symbolic links, by name: their targets
	var order []string           // the links in archive order
	files := map[string]bool{}   // regular files written, for hard links
	var written int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, err := entryName(h.Name, links)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name == "." {
				continue
			}
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := mkParent(root, name); err != nil {
				return err
			}
			n, err := writeFile(root, name, os.FileMode(h.Mode)&0o777, tr, limit-written)
			written += n
			if err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			files[name] = true
		case tar.TypeLink:
			target, err := entryName(h.Linkname, links)
			if err != nil {
				return fmt.Errorf("hard link %q: %w", h.Name, err)
			}
			if !files[target] {
				return fmt.Errorf("hard link %q names %q, which is not a file of the archive", h.Name, h.Linkname)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return err
			}
			files[name] = true
		case tar.TypeSymlink:
			if name == "." {
				return fmt.Errorf("entry %q replaces the archive's folder", h.Name)
			}
			if _, dup := links[name]; !dup {
				order = append(order, name)
			}
			links[name] = h.Linkname
		}
	}
	for _, name := range order {
		if !linkInside(name, links) {
			return fmt.Errorf("link %q -> %q leaves the archive's folder", name, links[name])
		}
	}
	for _, name := range order {
		if err := mkParent(root, name); err != nil {
			return err
		}
		if err := root.Symlink(links[name], name); err != nil {
			return err
		}
	}
	return nil
}

// entryName is an entry's name cleaned, slash-separated and relative to
// the archive's folder ("." for the folder itself). It fails for a name
// that is absolute, climbs out with "..", or lies under one of the
// archive's symbolic links.
func entryName(raw string, links map[string]string) (string, error) {
	name := path.Clean(strings.ReplaceAll(raw, `\`, "/"))
	if name == "." {
		return name, nil
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("entry %q leaves the archive's folder", raw)
	}
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		if _, ok := links[p]; ok {
			return "", fmt.Errorf("entry %q lies under the link %q", raw, p)
		}
	}
	return name, nil
}

// linkInside reports whether the link called name resolves inside the
// folder, following the archive's other links as the kernel would.
func linkInside(name string, links map[string]string) bool {
	var cur []string // the folder the target is read from, as components
	if d := path.Dir(name); d != "." {
		cur = strings.Split(d, "/")
	}
	target := links[name]
	if target == "" || path.IsAbs(target) {
		return false
	}
	todo := strings.Split(target, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(cur[:len(cur):len(cur)], c)
		t, ok := links[strings.Join(next, "/")]
		if !ok {
			cur = next
			continue
		}
		// A link on the way: its target is read from its own folder, cur.
		if hops++; hops > maxLinkHops || t == "" || path.IsAbs(t) {
			return false
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return true
}

// mkParent makes the folders above name.
func mkParent(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		return root.MkdirAll(dir, 0o755)
	}
	return nil
}

// writeFile writes r to name, at most budget bytes; it returns how many
// it wrote.
func writeFile(root *os.Root, name string, mode os.FileMode, r io.Reader, budget int64) (int64, error) {
	out, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyN(out, r, max(budget, 0)+1)
	if err == io.EOF {
		err = nil
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > budget {
		err = errUnpackTooLarge
	}
	return n, err
}
