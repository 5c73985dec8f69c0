package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/inferd/inferd/repo/tempdir"
)

// repoCache is the folder the models of s3://, gs:// and as:// roots are
// copied to, and what the server found there, so that its stop removes
// the folders it made and left empty. The copies themselves go when their
// models unload (repo.Holder).
type repoCache struct {
	path  string
	made  bool            // the folder did not exist at start
	found map[string]bool // its entries at start
}

// openRepoCache picks the folder: --repository-cache-dir, else
// $TRITON_AWS_MOUNT_DIRECTORY, $TRITON_GCS_MOUNT_DIRECTORY or
// $TRITON_AZURE_MOUNT_DIRECTORY, else (when a root is remote) a new folder
// under the process's temporary folder, which the next start sweeps
// should this process die (repo/tempdir).
func openRepoCache(cfg *config) (*repoCache, error) {
	dir := cfg.cacheDir
	for _, env := range []string{"TRITON_AWS_MOUNT_DIRECTORY", "TRITON_GCS_MOUNT_DIRECTORY", "TRITON_AZURE_MOUNT_DIRECTORY"} {
		if dir == "" {
			dir = cfg.env.get(env)
		}
	}
	if dir == "" {
		if !slices.ContainsFunc(cfg.repos, func(r string) bool { return strings.Contains(r, "://") }) {
			return &repoCache{}, nil // nothing to copy
		}
		made, err := tempdir.Make("cache-")
		if err != nil {
			return nil, fmt.Errorf("repository cache: %w", err)
		}
		return &repoCache{path: made, made: true}, nil
	}
	c := &repoCache{path: dir, found: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.made = true
	case err != nil:
		return nil, fmt.Errorf("repository cache %s: %w", dir, err)
	}
	for _, e := range entries {
		c.found[e.Name()] = true
	}
	return c, nil
}

// clean removes the folders the server made in the cache that are empty
// now (a root's, once its models' copies went), and the cache folder when
// the server made it and it is empty. What was there at start is kept.
func (c *repoCache) clean() error {
	if c.path == "" {
		return nil
	}
	entries, err := os.ReadDir(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("repository cache %s: %w", c.path, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && !c.found[e.Name()] {
			errs = append(errs, removeEmpty(filepath.Join(c.path, e.Name())))
		}
	}
	if c.made {
		errs = append(errs, removeEmpty(c.path))
	}
	return errors.Join(errs...)
}

// removeEmpty removes the folder p if it is empty; one that is not (a
// copy another server sharing the folder still uses) stays.
func removeEmpty(p string) error {
	err := os.Remove(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return fmt.Errorf("repository cache: %w", err)
}
