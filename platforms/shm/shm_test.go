package shm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/shm"
)

func wantError(t *testing.T, err error, code core.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", msg)
	}
	if err.Error() != msg || core.CodeOf(err) != code {
		t.Fatalf("error %q (%v), want %q (%v)", err, core.CodeOf(err), msg, code)
	}
}

func TestRegisterErrors(t *testing.T) {
	key := shmtest.Object(t, 4096)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf("inferd_shm_test_link_%d", os.Getpid())
	if err := os.Symlink(outside, "/dev/shm/"+link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("/dev/shm/" + link) })

	tests := []struct {
		name, key    string
		offset, size uint64
		code         core.Code
		msg          string
	}{
		{"slashes", "///", 0, 16, core.CodeInvalidArg, "cannot register shared memory region 'r' - invalid shm key '///'"},
		{"empty", "", 0, 16, core.CodeInvalidArg, "cannot register shared memory region 'r' - invalid shm key ''"},
		{"reserved", "//triton_python_backend_shm_region_1", 0, 16, core.CodeInvalidArg,
			"cannot register shared memory region 'r' with key '//triton_python_backend_shm_region_1' as the key contains the reserved prefix 'triton_python_backend_shm_region_'"},
		{"escape", "/../../etc/passwd", 0, 16, core.CodeInternal, "Unable to open shared memory region: '/../../etc/passwd'"},
		{"dotdot", "..", 0, 16, core.CodeInternal, "Unable to open shared memory region: '..'"},
		{"subdir", "a/b", 0, 16, core.CodeInternal, "Unable to open shared memory region: 'a/b'"},
		{"symlink", "/" + link, 0, 16, core.CodeInternal, "Unable to open shared memory region: '/" + link + "'"},
		{"missing", "/inferd_no_such_object", 0, 16, core.CodeInternal, "Unable to open shared memory region: '/inferd_no_such_object'"},
		{"past end", key, 4000, 97, core.CodeInvalidArg, "failed to register shared memory region 'r': invalid args"},
		{"overflow", key, 16, math.MaxUint64 - 8, core.CodeInvalidArg, "failed to register shared memory region 'r': invalid args"},
		{"empty region", key, 0, 0, core.CodeInvalidArg, "failed to register shared memory region 'r': unable to process address spaceinvalid argument"},
	}
	m := shm.NewManager(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, m.RegisterSystem("r", tt.key, tt.offset, tt.size), tt.code, tt.msg)
		})
	}
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 0 {
		t.Fatalf("status after refusals: %v %v", st, err)
	}
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	wantError(t, m.RegisterSystem("r", key, 0, 16), core.CodeAlreadyExists, "shared memory region 'r' already in manager")
	wantError(t, m.RegisterCUDA("r", []byte{1}, 0, 16), core.CodeInvalidArg,
		"failed to register CUDA shared memory region: 'r', GPUs not supported")
}

func TestStatusAndUnregister(t *testing.T) {
	key := shmtest.Object(t, 8192)
	m := shm.NewManager(nil)
	for _, n := range []string{"b", "a"} {
		if err := m.RegisterSystem(n, key, 4096, 100); err != nil {
			t.Fatal(err)
		}
	}
	st, err := m.Status(shm.System, "")
	if err != nil || len(st) != 2 || st[0].Name != "a" || st[1] != (shm.Status{Name: "b", Kind: shm.System, Key: key, Offset: 4096, ByteSize: 100}) {
		t.Fatalf("status: %+v %v", st, err)
	}
	if st, err := m.Status(shm.CUDA, ""); err != nil || len(st) != 0 {
		t.Fatalf("cuda status: %+v %v", st, err)
	}
	_, err = m.Status(shm.System, "c")
	wantError(t, err, core.CodeNotFound, "Unable to find system shared memory region: 'c'")
	_, err = m.Status(shm.CUDA, "c")
	wantError(t, err, core.CodeNotFound, "Unable to find cuda shared memory region: 'c'")
	_, err = m.Status(shm.CUDA, "a")
	wantError(t, err, core.CodeNotFound, "The region named 'a' is registered as system shared memory, not CUDA shared memory")

	ctx := context.Background()
	if err := m.Unregister(ctx, shm.CUDA, "a"); err != nil { // other kind: nothing to do
		t.Fatal(err)
	}
	if err := m.Unregister(ctx, shm.System, "nope"); err != nil {
		t.Fatal(err)
	}
	if err := m.Unregister(ctx, shm.System, "a"); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(shm.System, ""); len(st) != 1 || st[0].Name != "b" {
		t.Fatalf("after unregister a: %+v", st)
	}
	if err := m.Unregister(ctx, shm.System, ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(shm.System, ""); len(st) != 0 {
		t.Fatalf("after unregister all: %+v", st)
	}
}

func TestAcquireBoundsAndCopies(t *testing.T) {
	key := shmtest.Object(t, 3*4096)
	m := shm.NewManager(nil)
	// An offset that is not page-aligned: mapped from its page.
	if err := m.RegisterSystem("r", key, 100, 4096); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset, size uint64
		code         core.Code
		msg          string
	}{
		{4096, 1, core.CodeInvalidArg, "Invalid offset for shared memory region: 'r'"},
		{10, 4087, core.CodeInvalidArg, "Invalid offset + byte size for shared memory region: 'r'"},
		{10, math.MaxUint64 - 5, core.CodeInvalidArg, "Integer overflow detected: byte_size (18446744073709551610) + offset (10) exceeds maximum value (18446744073709551615) for region 'r'"},
	}
	for _, tt := range tests {
		_, err := m.Acquire("r", tt.offset, tt.size)
		wantError(t, err, tt.code, tt.msg)
	}
	_, err := m.Acquire("x", 0, 1)
	wantError(t, err, core.CodeNotFound, "Unable to find shared memory region: 'x'")

	s, err := m.Acquire("r", 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	got, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 16)
	for i := range want {
		want[i] = byte(100 + 8 + i)
	}
	if !bytes.Equal(got, want) || s.Len() != 16 || s.Region() != "r" || s.Offset() != 8 || s.Kind() != shm.System {
		t.Fatalf("span %v %d %s %d: % x", s.Kind(), s.Len(), s.Region(), s.Offset(), got)
	}
	if err := s.CopyIn([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("/dev/shm" + key)
	if err != nil {
		t.Fatal(err)
	}
	if string(file[108:113]) != "hello" {
		t.Fatalf("object holds %q", file[108:113])
	}
	if err := s.CopyIn(make([]byte, 17)); err == nil {
		t.Fatal("copy past the span accepted")
	}
	if err := s.CopyOut(make([]byte, 17)); err == nil {
		t.Fatal("copy out past the span accepted")
	}
}

// A truncated object must fail the copy, not kill the process with SIGBUS.
func TestTruncatedObject(t *testing.T) {
	key := shmtest.Object(t, 1<<20)
	m := shm.NewManager(nil)
	if err := m.RegisterSystem("r", key, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := os.Truncate("/dev/shm"+key, 0); err != nil {
		t.Fatal(err)
	}
	_, err = s.Bytes()
	if !errors.Is(err, shm.ErrFault) || core.CodeOf(err) != core.CodeInternal {
		t.Fatalf("read of a truncated object: %v", err)
	}
	if err.Error() != "shared memory region 'r' is no longer backed by its object: it was truncated" {
		t.Fatalf("message %q", err)
	}
	if err := s.CopyIn(make([]byte, 4096)); !errors.Is(err, shm.ErrFault) {
		t.Fatalf("write to a truncated object: %v", err)
	}
	// The region grows back: copies work again.
	if err := os.Truncate("/dev/shm"+key, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyIn([]byte{7}); err != nil {
		t.Fatalf("after regrowth: %v", err)
	}
}

func TestUnregisterWaitsForSpans(t *testing.T) {
	key := shmtest.Object(t, 4096)
	m := shm.NewManager(nil)
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	s, err := m.Acquire("r", 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Unregister(context.Background(), shm.System, "r") }()
	select {
	case err := <-done:
		t.Fatalf("unregister returned while a span was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// The name is free at once, and the held span still reads its mapping.
	if _, err := m.Acquire("r", 0, 8); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("acquire during unregister: %v", err)
	}
	if err := m.RegisterSystem("r", key, 0, 16); err != nil {
		t.Fatalf("register the freed name: %v", err)
	}
	if _, err := s.Bytes(); err != nil {
		t.Fatal(err)
	}
	s.Release()
	s.Release() // twice is harmless
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("unregister did not return after the span was released")
	}
	if st, _ := m.Status(shm.System, "r"); len(st) != 1 || st[0].ByteSize != 16 {
		t.Fatalf("the new registration: %+v", st)
	}

	// A context that ends first returns its error; the region is unmapped
	// by its last user.
	s, err = m.Acquire("r", 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Unregister(ctx, shm.System, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unregister with an expired context: %v", err)
	}
	s.Release()
}

// fakeDevice stands in for CUDA on machines without it; the CUDA IPC path
// itself is tested where a GPU is present.
type fakeDevice struct{ closed chan struct{} }

type fakeMemory struct {
	data   []byte
	closed chan struct{}
}

func (d fakeDevice) Open(_ string, handle []byte, _ int64, size uint64) (shm.DeviceMemory, error) {
	if len(handle) != 64 {
		return nil, errors.New("invalid args")
	}
	return &fakeMemory{data: make([]byte, size), closed: d.closed}, nil
}
func (f *fakeMemory) Ptr() uintptr { return 0 }
func (f *fakeMemory) CopyOut(dst []byte, off uint64) error {
	copy(dst, f.data[off:])
	return nil
}
func (f *fakeMemory) CopyIn(off uint64, src []byte) error {
	copy(f.data[off:], src)
	return nil
}
func (f *fakeMemory) Close() error { close(f.closed); return nil }

func TestCUDARegions(t *testing.T) {
	dev := fakeDevice{closed: make(chan struct{})}
	m := shm.NewManager(dev)
	if !m.HasDevice() || shm.NewManager(nil).HasDevice() {
		t.Fatal("HasDevice")
	}
	wantError(t, m.RegisterCUDA("g", []byte{1}, 0, 64), core.CodeInvalidArg, "failed to register shared memory region 'g': invalid args")
	if err := m.RegisterCUDA("g", make([]byte, 64), 1, 64); err != nil {
		t.Fatal(err)
	}
	st, err := m.Status(shm.CUDA, "g")
	if err != nil || st[0] != (shm.Status{Name: "g", Kind: shm.CUDA, DeviceID: 1, ByteSize: 64}) {
		t.Fatalf("status %+v %v", st, err)
	}
	_, err = m.Status(shm.System, "g")
	wantError(t, err, core.CodeNotFound, "The region named 'g' is registered as CUDA shared memory, not system shared memory")
	s, err := m.Acquire("g", 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyIn([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Bytes(); err != nil || !bytes.Equal(b, []byte{1, 2, 3, 4}) || s.Kind() != shm.CUDA {
		t.Fatalf("%v %v", b, err)
	}
	s.Release()
	if err := m.Unregister(context.Background(), shm.CUDA, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dev.closed:
	default:
		t.Fatal("unregister did not close the CUDA region")
	}
}

// Registering, using and unregistering from many goroutines at once stays
// consistent (run under -race).
func TestConcurrentUse(t *testing.T) {
	key := shmtest.Object(t, 64*1024)
	m := shm.NewManager(nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "r" + strconv.Itoa(g%3) // names shared between goroutines
			for i := range 200 {
				err := m.RegisterSystem(name, key, uint64(g)*4096, 4096)
				if err != nil && core.CodeOf(err) != core.CodeAlreadyExists {
					t.Error(err)
					return
				}
				s, err := m.Acquire(name, 0, 64)
				if err == nil {
					if err := s.CopyIn([]byte{byte(i)}); err != nil {
						t.Error(err)
					}
					if _, err := s.Bytes(); err != nil {
						t.Error(err)
					}
					s.Release()
				} else if core.CodeOf(err) != core.CodeNotFound {
					t.Error(err)
				}
				if _, err := m.Status(shm.System, ""); err != nil {
					t.Error(err)
				}
				if i%3 == 0 {
					if err := m.Unregister(context.Background(), shm.System, name); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := m.Unregister(context.Background(), shm.System, ""); err != nil {
		t.Fatal(err)
	}
}

func TestHolds(t *testing.T) {
	key := shmtest.Object(t, 4096)
	m := shm.NewManager(nil)
	if err := m.RegisterSystem("r", key, 0, 4096); err != nil {
		t.Fatal(err)
	}
	var h shm.Holds
	for range 3 {
		s, err := m.Acquire("r", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		h.Add(s)
	}
	h.Release()
	var nilHolds *shm.Holds
	nilHolds.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Unregister(ctx, shm.System, "r"); err != nil {
		t.Fatalf("unregister after the holds were released: %v", err)
	}
}
