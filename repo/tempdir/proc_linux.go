package tempdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// startTime is the start time of process pid, in clock ticks since boot
// (field 22 of /proc/<pid>/stat, proc(5)).
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')', with field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	const startField = 22 - 3
	if len(fields) <= startField {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return string(fields[startField]), nil
}

// running reports whether pid is the process that started at start. When
// that cannot be told (a /proc that hides other users' processes), it
// says yes: the folder is kept.
func running(pid int, start string) bool {
	now, err := startTime(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || now == start
}

// openFolder opens path, which must be a folder (not a link to one) that
// this user owns.
func openFolder(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() || int(sys.Uid) != os.Getuid() {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNotOwn)
	}
	return f, nil
}

// lock takes f's exclusive lock without waiting.
func lock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
