// Package shmtest creates the POSIX shared-memory objects a client of the
// shared-memory extension would create (shm_open(3) in /dev/shm), for tests
// that register regions over real listeners.
package shmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/inferd/inferd/platforms/shm"
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

// Read is the contents of the object named by key.
func Read(t testing.TB, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(key))
	if err != nil {
		t.Fatalf("shmtest: %v", err)
	}
	return b
}

// Region registers a new object holding data as system region name and
// returns the object's key.
func Region(t testing.TB, regions *shm.Manager, name string, data []byte) string {
	t.Helper()
	key := ObjectWith(t, data)
	if err := regions.RegisterSystem(name, key, 0, uint64(len(data))); err != nil {
		t.Fatalf("shmtest: register %s: %v", name, err)
	}
	return key
}

// Unregister unregisters system region name, failing the test unless that
// returns within a generous deadline: nothing holds the region any more.
func Unregister(t testing.TB, regions *shm.Manager, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := regions.Unregister(ctx, shm.System, name); err != nil {
		t.Fatalf("unregister %s: %v", name, err)
	}
}

// HostMemory stands in for an opened CUDA region (shm.DeviceMemory) on a
// machine without a GPU: its "device memory" is host memory.
type HostMemory []byte

// Ptr implements shm.DeviceMemory: the host address of the first byte,
// which a backend reading a region registered on device -1 (host memory,
// core.DeviceData) reads in place. Go's heap does not move objects, and the
// region keeps the slice alive.
func (m HostMemory) Ptr() uintptr {
	if len(m) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(m)))
}

// CopyOut implements shm.DeviceMemory.
func (m HostMemory) CopyOut(dst []byte, offset uint64) error {
	copy(dst, m[offset:])
	return nil
}

// CopyIn implements shm.DeviceMemory.
func (m HostMemory) CopyIn(offset uint64, src []byte) error {
	copy(m[offset:], src)
	return nil
}

// Close implements shm.DeviceMemory.
func (m HostMemory) Close() error { return nil }

// Device stands in for a GPU (shm.Device) on a machine without one: the
// first byte of a handle names one of Mem's buffers (host memory, as
// HostMemory), and the copies between that memory and the host are
// counted, so that a test sees whether a backend read or wrote a region
// by address (a region registered on device -1) or through copies.
type Device struct {
	Mem       map[byte][]byte
	CopiesOut atomic.Int32 // reads of a region into host memory
	CopiesIn  atomic.Int32 // writes of host memory into a region
}

// Handle is a 64-byte IPC handle naming Device.Mem[b].
func Handle(b byte) []byte { return append([]byte{b}, make([]byte, 63)...) }

// Open implements shm.Device.
func (d *Device) Open(_ string, handle []byte, _ int64, byteSize uint64) (shm.DeviceMemory, error) {
	m := d.Mem[handle[0]]
	if uint64(len(m)) < byteSize {
		return nil, fmt.Errorf("shmtest: no device memory %d of %d bytes", handle[0], byteSize)
	}
	return countedMemory{HostMemory(m), d}, nil
}

type countedMemory struct {
	HostMemory
	d *Device
}

func (c countedMemory) CopyOut(dst []byte, offset uint64) error {
	c.d.CopiesOut.Add(1)
	return c.HostMemory.CopyOut(dst, offset)
}

func (c countedMemory) CopyIn(offset uint64, src []byte) error {
	c.d.CopiesIn.Add(1)
	return c.HostMemory.CopyIn(offset, src)
}
