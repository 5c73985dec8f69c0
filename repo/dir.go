package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Dir is a repository root on local disk.
type Dir struct {
	Path string
}

// OpenDir checks that path is a folder, as Triton does at start-up.
func OpenDir(path string) (*Dir, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("failed to stat file %s: repository path is not a valid directory", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", path, err)
	}
	return &Dir{Path: abs}, nil
}

func (d *Dir) String() string { return d.Path }

// Models lists every folder directly under the root. Hidden folders count
// too: Triton does not filter them.
func (d *Dir) Models(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Path, err)
	}
	var names []string
	for _, e := range entries {
		if isDir(filepath.Join(d.Path, e.Name()), e) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Localize returns the model folder itself.
func (d *Dir) Localize(ctx context.Context, model string) (string, error) {
	p := filepath.Join(d.Path, model)
	st, err := os.Stat(p)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("model folder %s not found", p)
	}
	return p, nil
}

// Fingerprint hashes the path, size, modification time and mode of every
// entry below the model folder (links followed for the folder itself).
func (d *Dir) Fingerprint(ctx context.Context, model string) (string, error) {
	root, err := d.Localize(ctx, model)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			// An unreadable part counts as absent, as in Triton.
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%o\n", filepath.ToSlash(rel), info.Size(), info.ModTime().UnixNano(), info.Mode())
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("fingerprint %s: %w", root, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isDir follows symbolic links, so a linked model folder counts.
func isDir(path string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&os.ModeSymlink != 0 {
		st, err := os.Stat(path)
		return err == nil && st.IsDir()
	}
	return false
}
