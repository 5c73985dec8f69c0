package shm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/shm"
)

const truncatedMsg = "shared memory region 'r' is no longer backed by its object: it was truncated"

func guardedManager(t *testing.T) *shm.Manager {
	t.Helper()
	m := shm.NewManager(nil)
	if err := m.InstallGuard(); err != nil {
		t.Fatal(err)
	}
	return m
}

func wantTruncated(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, shm.ErrFault) || core.CodeOf(err) != core.CodeInternal || err.Error() != truncatedMsg {
		t.Fatalf("%s: %v (%v), want %q", what, err, core.CodeOf(err), truncatedMsg)
	}
}

// With the guard, a region's bytes are handed out in place, and a
// truncation under them neither kills the process nor goes unnoticed:
// the reads and writes complete, the span and every later use of the
// region fail, and other regions work on.
func TestGuardedRegionTruncated(t *testing.T) {
	const size = 1 << 20
	m := guardedManager(t)
	key, other := shmtest.Object(t, size), shmtest.Object(t, 4096)
	if err := m.RegisterSystem("r", key, 4096+100, size-8192); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterSystem("other", other, 0, 4096); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 8, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	data, ok := s.Data()
	if !ok || len(data) != 64<<10 || data[0] != byte((4096+100+8)%256) {
		t.Fatalf("Data: ok %v, %d bytes, first %d", ok, len(data), data[0])
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err before truncation: %v", err)
	}
	if err := os.Truncate("/dev/shm"+key, 0); err != nil {
		t.Fatal(err)
	}
	// Go reads and writes the lost pages: zero pages stand in.
	sum := 0
	for _, b := range data {
		sum += int(b)
	}
	data[len(data)-1] = 9
	if sum != 0 || data[len(data)-1] != 9 {
		t.Fatalf("after truncation: sum %d, last %d", sum, data[len(data)-1])
	}
	wantTruncated(t, "Span.Err", s.Err())
	var h shm.Holds
	h.Add(s)
	wantTruncated(t, "Holds.Err", h.Err())
	_, err = s.Bytes()
	wantTruncated(t, "Bytes", err)
	wantTruncated(t, "CopyIn", s.CopyIn([]byte{1}))
	h.Release()

	// Broken until unregistered, even once the object grows back.
	if err := os.Truncate("/dev/shm"+key, size); err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire("r", 0, 16)
	wantTruncated(t, "Acquire", err)

	o, err := m.Acquire("other", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Bytes()
	if err != nil || b[4095] != 255 || o.Err() != nil {
		t.Fatalf("other region: %v, %v", err, o.Err())
	}
	o.Release()

	if err := m.Unregister(context.Background(), shm.System, "r"); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	s, err = m.Acquire("r", 0, 4096)
	if err != nil {
		t.Fatalf("registered again: %v", err)
	}
	defer s.Release()
	if _, err := s.Bytes(); err != nil {
		t.Fatalf("registered again: %v", err)
	}
}

// A copy of a guarded region truncated between Acquire and the copy fails
// the copy, as without the guard.
func TestGuardedCopyTruncated(t *testing.T) {
	m := guardedManager(t)
	key := shmtest.Object(t, 1<<20)
	if err := m.RegisterSystem("r", key, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := os.Truncate("/dev/shm"+key, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = s.Bytes()
	wantTruncated(t, "Bytes", err)
}

// The guard forwards the faults that are not its own to Go's handler: a
// Manager without the guard fails its copies through SetPanicOnFault as
// before, a mapping the guard does not know still panics under
// SetPanicOnFault, and nil dereferences panic as ever.
func TestGuardForwardsOtherFaults(t *testing.T) {
	guardedManager(t)

	key := shmtest.Object(t, 1<<20)
	m := shm.NewManager(nil)
	if err := m.RegisterSystem("r", key, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Data(); ok {
		t.Fatal("Data of a region that is not guarded")
	}
	if err := os.Truncate("/dev/shm"+key, 0); err != nil {
		t.Fatal(err)
	}
	_, err = s.Bytes()
	wantTruncated(t, "unguarded Bytes", err)
	s.Release()

	f, err := os.CreateTemp(t.TempDir(), "mapped")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 16); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<16, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	var read byte
	addr := func() (addr uintptr) {
		old := debug.SetPanicOnFault(true)
		defer debug.SetPanicOnFault(old)
		defer func() {
			p := recover()
			if a, ok := p.(interface{ Addr() uintptr }); ok {
				addr = a.Addr()
			} else if p != nil {
				panic(p)
			}
		}()
		read = mem[100]
		return 0
	}()
	if want := uintptr(unsafe.Pointer(unsafe.SliceData(mem))) + 100; addr != want {
		t.Fatalf("SetPanicOnFault: fault at %#x, want %#x (read %d)", addr, want, read)
	}

	var nilErr error
	func() {
		defer func() {
			if re, ok := recover().(runtime.Error); ok {
				nilErr = re
			}
		}()
		var p *int
		_ = *p
	}()
	if nilErr == nil {
		t.Fatal("nil dereference did not panic")
	}
}

// WriteOutput copies an output into its span unless the output already
// lies at the span's start (written in place through Data).
func TestWriteOutput(t *testing.T) {
	m := guardedManager(t)
	key := shmtest.Object(t, 4096)
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	data, _ := s.Data()
	copy(data, "in place")
	if err := shm.WriteOutput(s, data[:8]); err != nil {
		t.Fatal(err)
	}
	if err := shm.WriteOutput(s, []byte("copied")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/dev/shm" + key)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b[16:24]); got != "copiedce" {
		t.Fatalf("span holds %q", got)
	}
	if err := os.Truncate("/dev/shm"+key, 0); err != nil {
		t.Fatal(err)
	}
	data[0] = 1
	wantTruncated(t, "in place after truncation", shm.WriteOutput(s, data[:8]))
}

// Holds.Detach copies out of an input's span the tensors whose bytes lie
// there, and leaves the others alone.
func TestHoldsDetach(t *testing.T) {
	m := guardedManager(t)
	key := shmtest.Object(t, 4096)
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	in, err := m.Acquire("r", 0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Acquire("r", 2048, 1024)
	if err != nil {
		t.Fatal(err)
	}
	var h shm.Holds
	h.AddInput(in)
	h.Add(out)
	defer h.Release()
	inData, _ := in.Data()
	outData, _ := out.Data()
	own := []byte{1, 2, 3}
	ts := []*core.Tensor{{Data: inData[10:20]}, {Data: outData}, {Data: own}}
	h.Detach(ts)
	if unsafe.SliceData(ts[0].Data) == unsafe.SliceData(inData[10:20]) || !bytes.Equal(ts[0].Data, inData[10:20]) {
		t.Fatal("the input's bytes were not copied out")
	}
	if unsafe.SliceData(ts[1].Data) != unsafe.SliceData(outData) || unsafe.SliceData(ts[2].Data) != unsafe.SliceData(own) {
		t.Fatal("bytes outside the inputs' spans were copied")
	}
}
