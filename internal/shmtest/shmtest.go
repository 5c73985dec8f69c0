// Package shmtest creates the POSIX shared-memory objects a client of the
// shared-memory extension would create (shm_open(3) in /dev/shm), for tests
// that register regions over real listeners.
package shmtest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Object creates a shared-memory object of size bytes, byte j holding
// byte(j), and returns its key ("/name", as clients pass it); the object is
// removed at t's cleanup.
func Object(t testing.TB, size int) string {
	t.Helper()
	data := make([]byte, size)
	for j := range data {
		data[j] = byte(j)
	}
	return ObjectWith(t, data)
}

// ObjectWith creates a shared-memory object holding data and returns its
// key; the object is removed at t's cleanup.
func ObjectWith(t testing.TB, data []byte) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 80 { // object names are file names: NAME_MAX bytes
		name = name[:80]
	}
	base := fmt.Sprintf("inferd_test_%d_%s_", os.Getpid(), name)
	for i := 0; ; i++ {
		path := "/dev/shm/" + base + strconv.Itoa(i)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			t.Fatalf("shmtest: %v", err)
		}
		t.Cleanup(func() { os.Remove(path) })
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("shmtest: %v", err)
		}
		return "/" + base + strconv.Itoa(i)
	}
}

// Path is the file of the object named by key.
func Path(key string) string { return "/dev/shm/" + strings.TrimLeft(key, "/") }
