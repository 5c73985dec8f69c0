// Package tempdir keeps an inferd process's temporary folders (the model
// files a load request uploads, the Python backend's module and unpacked
// environments, the default local copies of remote models) under one
// folder of its own, <TMPDIR>/inferd-<pid>-<start>, and removes the folders
// of processes that ended without removing theirs (a crash, SIGKILL, the
// OOM killer).
//
// <start> is the process's start time, so that a pid used again by a later
// process (a restarted container's pid 1) names another folder. The
// process holds a lock (flock) on its folder from creation to exit, which
// the kernel drops however the process ends. Sweep removes a folder only
// when its name is of this form, this user owns it, nobody holds its lock
// and its pid does not run the process that made it: a live server's
// folder is never touched, also when another pid namespace (a container)
// shares the temporary folder.
package tempdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
)

// prefix starts every process folder's name.
const prefix = "inferd-"

// folderName matches process folders: inferd-<pid>-<start>.
var folderName = regexp.MustCompile(`^inferd-([1-9][0-9]*)-([0-9]+)$`)

// ErrNotOwn marks a process folder path taken by something this process
// cannot use: not a folder, a link, or another user's.
var ErrNotOwn = errors.New("temporary folder is not this process's")

// held are this process's folders, by temporary folder (TMPDIR may change
// in tests), each with its lock. It is process-wide by nature: the lock
// must live as long as the process, whichever server made the folder.
var held = struct {
	sync.Mutex
	locks map[string]*os.File
}{locks: map[string]*os.File{}}

// Own returns this process's folder under os.TempDir(), creating it
// (mode 0700, locked) on first use, or again after something removed it.
func Own() (string, error) {
	base := filepath.Clean(os.TempDir())
	held.Lock()
	defer held.Unlock()
	if f := held.locks[base]; f != nil {
		if st, err := os.Lstat(f.Name()); err == nil && st.IsDir() {
			return f.Name(), nil
		}
		_ = f.Close() // removed under us: made anew below
		delete(held.locks, base)
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return "", fmt.Errorf("temporary folder: %w", err)
	}
	path := filepath.Join(base, prefix+strconv.Itoa(os.Getpid())+"-"+start)
	f, err := create(path)
	if err != nil {
		return "", fmt.Errorf("temporary folder: %w", err)
	}
	held.locks[base] = f
	return path, nil
}

// create makes path (or takes it, when this process made it before) and
// locks it.
func create(path string) (*os.File, error) {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	f, err := openFolder(path)
	if err != nil {
		return nil, err
	}
	if err := lock(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// Make creates a new folder under this process's folder, its name pattern
// with a random part (os.MkdirTemp's rules), and returns its path.
func Make(pattern string) (string, error) {
	own, err := Own()
	if err != nil {
		return "", err
	}
	return os.MkdirTemp(own, pattern)
}

// RemoveOwn removes this process's folders with everything in them. It is
// for the end of the process (main), once nothing uses them: servers that
// share the process (tests) remove only their own sub-folders.
func RemoveOwn() error {
	held.Lock()
	defer held.Unlock()
	var errs []error
	for base, f := range held.locks {
		errs = append(errs, os.RemoveAll(f.Name()))
		_ = f.Close()
		delete(held.locks, base)
	}
	return errors.Join(errs...)
}

// Sweep removes, under os.TempDir(), the process folders of processes that
// are gone (see the package comment for what is left alone) and returns
// their paths. A folder it cannot judge is kept.
func Sweep() ([]string, error) {
	base := filepath.Clean(os.TempDir())
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", base, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		m := folderName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() { // a link is not a folder here
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		path := filepath.Join(base, e.Name())
		ok, err := removeAbandoned(path, pid, m[2])
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// removeAbandoned removes path when its process is gone: it does not run
// (running), this user owns the folder and no one holds its lock, which
// this call then holds while it removes the folder.
func removeAbandoned(path string, pid int, start string) (bool, error) {
	if running(pid, start) {
		return false, nil
	}
	f, err := openFolder(path)
	if err != nil {
		return false, nil // gone meanwhile, a link, or not ours
	}
	defer f.Close()
	if lock(f) != nil {
		return false, nil // its process lives (in another pid namespace)
	}
	if err := os.RemoveAll(path); err != nil {
		return false, fmt.Errorf("remove the abandoned temporary folder %s: %w", path, err)
	}
	return true, nil
}
