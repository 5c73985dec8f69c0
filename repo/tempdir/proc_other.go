//go:build !linux

package tempdir

import (
	"crypto/rand"
	"fmt"
	"os"
)

// startTime stands in for the start time where /proc is missing: a random
// number, which keeps a later process with the same pid off this folder.
func startTime(int) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprint(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])), nil
}

// running cannot tell a process's folder from a dead one's without /proc:
// every folder is kept.
func running(int, string) bool { return true }

// openFolder opens path, which must be a folder.
func openFolder(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.IsDir() {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNotOwn)
	}
	return f, nil
}

// lock is not needed where nothing is swept.
func lock(*os.File) error { return nil }
