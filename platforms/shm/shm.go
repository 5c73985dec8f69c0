// Package shm holds the client shared-memory regions of the shared-memory
// extension (triton-inference-server/server
// docs/protocol/extension_shared_memory.md): a client on the same host
// registers a POSIX shared-memory object (system) or a CUDA IPC handle
// (cuda) under a name, then names the region, an offset and a byte size in
// place of a tensor's data. One Manager serves both frontends, as Triton's
// SharedMemoryManager (src/shared_memory_manager.cc) does.
//
// Safety, where Triton trusts the client: a key opens an object in /dev/shm
// and nothing else (no path, no symlink); a region is mapped once; every
// use is bounds-checked without overflow; unregistering waits for the
// requests that use the region before unmapping it.
//
// Truncation: a client may shrink the object under a registered region,
// and touching a mapped page past the object's new end raises SIGBUS,
// which kills a process that does not handle it (Triton itself dies
// there). Without the guard (Manager.InstallGuard), inputs are copied out
// of their regions at decode and outputs copied in at encode, each copy
// running with faults turned into panics it recovers
// (runtime/debug.SetPanicOnFault): only Go code ever reads a mapping.
// With the guard, a C handler in front of Go's replaces a lost page with
// a zero page and counts the fault on the region, so backends may read
// inputs and write outputs in place, from Go or from C libraries (ONNX
// Runtime's threads, which SetPanicOnFault cannot cover); the call checks
// its spans once the run is over (Holds.Err) and fails with the
// truncation error, and the region stays broken, each later use failing
// the same way, until the client unregisters it: what it holds is no
// longer the client's object.
package shm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
)

// Kind is the memory a region lives in.
type Kind uint8

// Region kinds.
const (
	System Kind = iota // a POSIX shared-memory object, mapped into the server
	CUDA               // a CUDA IPC handle, device memory
)

func (k Kind) String() string {
	if k == CUDA {
		return "cuda"
	}
	return "system"
}

// dir is where POSIX shared-memory objects live on Linux (shm_open(3)).
const dir = "/dev/shm"

// reservedPrefix is the key prefix Triton keeps for its Python backend's own
// regions (kTritonSharedMemoryRegionPrefix in triton-inference-server/server
// src/common.h); inferd refuses it too, so that a client repository moved
// between the two servers meets the same rules.
const reservedPrefix = "triton_python_backend_shm_region_"

// ErrFault marks a copy that touched memory no longer backed by its object
// (the object was truncated under a registered region).
var ErrFault = errors.New("shared memory region is no longer backed by its object")

// Status is one registered region as the status routes report it.
type Status struct {
	Name     string
	Kind     Kind
	Key      string // system only
	Offset   uint64 // system only
	DeviceID int64  // cuda only
	ByteSize uint64
}

// Device opens CUDA IPC handles. Nil in a Manager means a build or a machine
// without CUDA, where registering a CUDA region is refused as Triton's
// CPU-only build refuses it.
type Device interface {
	// Open maps the IPC handle of byteSize bytes on device deviceID as
	// region name. An error holding a *core.Error reaches the client as
	// it is; any other is wrapped in Triton's register error.
	Open(name string, handle []byte, deviceID int64, byteSize uint64) (DeviceMemory, error)
}

// DeviceMemory is an opened CUDA region.
type DeviceMemory interface {
	// Ptr is the device address of the region's first byte.
	Ptr() uintptr
	// CopyOut copies len(dst) bytes at offset to host memory; CopyIn the
	// reverse.
	CopyOut(dst []byte, offset uint64) error
	CopyIn(offset uint64, src []byte) error
	Close() error
}

// Manager is the table of registered regions. The zero value is not
// usable; call NewManager.
type Manager struct {
	device Device

	mu      sync.Mutex
	regions map[string]*region
	guarded bool // InstallGuard was called: new system regions are guarded
}

// NewManager returns an empty table; device opens CUDA regions (nil: none).
func NewManager(device Device) *Manager {
	return &Manager{device: device, regions: map[string]*region{}}
}

// region is one registered region. Its uses are counted so that
// unregistering can wait for them and unmap once.
type region struct {
	status Status
	mem    []byte       // system: the mapping (whole pages)
	data   []byte       // system: the registered bytes within mem
	dev    DeviceMemory // cuda
	guard  guard        // system: the mapping's slot in the SIGBUS guard

	users sync.WaitGroup
}

// RegisterSystem maps byteSize bytes at offset of the shared-memory object
// key under name (Triton's RegisterSystemSharedMemory and its errors).
func (m *Manager) RegisterSystem(name, key string, offset, byteSize uint64) error {
	if err := validKey(name, key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.regions[name]; ok {
		return alreadyRegistered(name)
	}
	mem, data, err := mapObject(name, key, offset, byteSize)
	if err != nil {
		return err
	}
	g := noGuard
	if m.guarded {
		g = guardRange(mem)
	}
	m.regions[name] = &region{
		status: Status{Name: name, Kind: System, Key: key, Offset: offset, ByteSize: byteSize},
		mem:    mem, data: data, guard: g,
	}
	return nil
}

// RegisterCUDA opens a CUDA IPC handle of byteSize bytes on device deviceID
// under name.
func (m *Manager) RegisterCUDA(name string, handle []byte, deviceID int64, byteSize uint64) error {
	if m.device == nil {
		return &core.Error{Code: core.CodeInvalidArg,
			Msg: "failed to register CUDA shared memory region: '" + name + "', GPUs not supported"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.regions[name]; ok {
		return alreadyRegistered(name)
	}
	dev, err := m.device.Open(name, handle, deviceID, byteSize)
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	if err != nil {
		return &core.Error{Code: core.CodeInvalidArg,
			Msg: "failed to register shared memory region '" + name + "': " + err.Error()}
	}
	m.regions[name] = &region{
		status: Status{Name: name, Kind: CUDA, DeviceID: deviceID, ByteSize: byteSize},
		dev:    dev, guard: noGuard,
	}
	return nil
}

// HasDevice reports whether CUDA regions can be registered.
func (m *Manager) HasDevice() bool { return m.device != nil }

func alreadyRegistered(name string) error {
	return &core.Error{Code: core.CodeAlreadyExists, Msg: "shared memory region '" + name + "' already in manager"}
}

// Unregister removes the region name of kind (every region of kind when
// name is empty). A name that is not registered, or registered as the other
// kind, is not an error, as in Triton. The names are free again at once;
// Unregister returns once the requests using the regions have released
// them and the regions are unmapped, or when ctx ends (the last request
// then unmaps).
func (m *Manager) Unregister(ctx context.Context, kind Kind, name string) error {
	m.mu.Lock()
	var gone []*region
	for n, r := range m.regions {
		if r.status.Kind == kind && (name == "" || n == name) {
			gone = append(gone, r)
			delete(m.regions, n)
		}
	}
	m.mu.Unlock()

	var errs []error
	for _, r := range gone {
		done := make(chan error, 1)
		go func() {
			r.users.Wait()
			done <- r.close()
		}()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Status lists the regions of kind in name order, or the one named name,
// with Triton's errors for a name not registered or registered as the
// other kind.
func (m *Manager) Status(kind Kind, name string) ([]Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name != "" {
		r, ok := m.regions[name]
		if !ok {
			return nil, &core.Error{Code: core.CodeNotFound,
				Msg: "Unable to find " + kind.String() + " shared memory region: '" + name + "'"}
		}
		if r.status.Kind != kind {
			return nil, &core.Error{Code: core.CodeNotFound, Msg: "The region named '" + name +
				"' is registered as " + kindWords(r.status.Kind) + " shared memory, not " + kindWords(kind) + " shared memory"}
		}
		return []Status{r.status}, nil
	}
	out := []Status{}
	for _, r := range m.regions {
		if r.status.Kind == kind {
			out = append(out, r.status)
		}
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func kindWords(k Kind) string {
	if k == CUDA {
		return "CUDA"
	}
	return "system"
}

// Acquire holds byteSize bytes at offset of region name until the Span is
// released, with Triton's errors (GetMemoryInfo in
// triton-inference-server/server src/shared_memory_manager.cc). A nil
// Manager (client shared memory off) finds no region.
func (m *Manager) Acquire(name string, offset, byteSize uint64) (*Span, error) {
	if m == nil {
		return nil, &core.Error{Code: core.CodeNotFound, Msg: "Unable to find shared memory region: '" + name + "'"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.regions[name]
	if !ok {
		return nil, &core.Error{Code: core.CodeNotFound, Msg: "Unable to find shared memory region: '" + name + "'"}
	}
	if offset >= r.status.ByteSize {
		return nil, &core.Error{Code: core.CodeInvalidArg, Msg: "Invalid offset for shared memory region: '" + name + "'"}
	}
	if byteSize > math.MaxUint64-offset {
		return nil, &core.Error{Code: core.CodeInvalidArg, Msg: fmt.Sprintf(
			"Integer overflow detected: byte_size (%d) + offset (%d) exceeds maximum value (%d) for region '%s'",
			byteSize, offset, uint64(math.MaxUint64), name)}
	}
	if offset+byteSize > r.status.ByteSize {
		return nil, &core.Error{Code: core.CodeInvalidArg, Msg: "Invalid offset + byte size for shared memory region: '" + name + "'"}
	}
	if r.guard.faulted() {
		return nil, r.truncated()
	}
	r.users.Add(1)
	return &Span{region: r, offset: offset, size: byteSize}, nil
}

// InputTensor points t at byteSize bytes at offset of region name, with
// held the span the caller keeps until the call ends (nil when the bytes
// were copied). A CUDA region's span becomes t.Device, which a GPU backend
// reads in place and the core copies to the host for any other
// (core.Tensor.OnHost). A system region's bytes become t.Data: in place
// when the region is guarded against truncation (InstallGuard); otherwise
// copied out and the region let go at once, so that no backend reads a
// mapping whose object may shrink underneath.
func (m *Manager) InputTensor(t *core.Tensor, name string, offset, byteSize uint64) (held *Span, err error) {
	span, err := m.Acquire(name, offset, byteSize)
	if err != nil {
		return nil, err
	}
	if span.Kind() == CUDA {
		t.Device = span
		return span, nil
	}
	if data, ok := span.Data(); ok {
		t.Data = data
		return span, nil
	}
	defer span.Release()
	t.Data, err = span.Bytes()
	return nil, err
}

// DeviceID is the GPU of a CUDA region's span (core.DeviceData).
func (s *Span) DeviceID() int64 { return s.region.status.DeviceID }

// Addr is the address of the span's first byte: device memory for a CUDA
// region, the mapping for a system region (core.DeviceData).
func (s *Span) Addr() uintptr {
	if s.region.dev != nil {
		return s.region.dev.Ptr() + uintptr(s.offset)
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(s.region.data))) + uintptr(s.offset)
}

// Size is the span's byte count (core.DeviceData).
func (s *Span) Size() int { return int(s.size) }

// Span is a held part of a region: the bytes a tensor names.
type Span struct {
	region *region
	offset uint64
	size   uint64
	once   sync.Once
}

// Len is the span's byte size.
func (s *Span) Len() uint64 { return s.size }

// Kind is the memory of the span's region.
func (s *Span) Kind() Kind { return s.region.status.Kind }

// Region is the name of the span's region.
func (s *Span) Region() string { return s.region.status.Name }

// Offset is where the span starts in its region.
func (s *Span) Offset() uint64 { return s.offset }

// Data is the span's bytes in place, when its region is guarded (see
// Manager.InstallGuard): a backend may read and write them until the span
// is released, after which they must not be touched. ok is false for a
// region that is not guarded (or not system memory): copy instead.
func (s *Span) Data() (b []byte, ok bool) {
	if s.region.guard == noGuard {
		return nil, false
	}
	end := s.offset + s.size
	return s.region.data[s.offset:end:end], true
}

// Err is the truncation error once the span's region has lost a page
// (guarded regions only; a region that is not guarded fails its copies
// instead), nil otherwise.
func (s *Span) Err() error {
	if s.region.guard.faulted() {
		return s.region.truncated()
	}
	return nil
}

// Bytes copies the span out of the region. A system region's bytes are
// copied in the make-and-copy form the compiler turns into one
// allocation that is not zeroed first (runtime.makeslicecopy): a 16 MiB
// input is written once, not twice.
func (s *Span) Bytes() (b []byte, err error) {
	if s.region.dev != nil {
		b = make([]byte, s.size)
		return b, s.CopyOut(b)
	}
	err = s.fault(func() {
		src := s.region.data[s.offset : s.offset+s.size]
		c := make([]byte, len(src))
		copy(c, src)
		b = c
	})
	return b, err
}

// CopyOut copies the first len(dst) bytes of the span into dst.
func (s *Span) CopyOut(dst []byte) error {
	if uint64(len(dst)) > s.size {
		return fmt.Errorf("shm: copy of %d bytes out of a span of %d", len(dst), s.size)
	}
	if s.region.dev != nil {
		return s.region.dev.CopyOut(dst, s.offset)
	}
	return s.fault(func() { copy(dst, s.region.data[s.offset:]) })
}

// CopyIn copies src to the start of the span.
func (s *Span) CopyIn(src []byte) error {
	if uint64(len(src)) > s.size {
		return fmt.Errorf("shm: copy of %d bytes into a span of %d", len(src), s.size)
	}
	if s.region.dev != nil {
		return s.region.dev.CopyIn(s.offset, src)
	}
	return s.fault(func() { copy(s.region.data[s.offset:], src) })
}

// WriteOutput puts an output's bytes at the start of span: nothing to do
// when data already lies there (a backend wrote it in place through
// Span.Data), a copy otherwise. It reports a truncation either way.
func WriteOutput(span *Span, data []byte) error {
	if in, ok := span.Data(); ok && len(data) > 0 && len(data) <= len(in) && unsafe.SliceData(in) == unsafe.SliceData(data) {
		return span.Err()
	}
	return span.CopyIn(data)
}

// fault runs a copy that touches the mapping with memory faults turned into
// a panic it recovers (runtime/debug.SetPanicOnFault): a truncated object
// raises SIGBUS on the pages past its new end.
func (s *Span) fault(copyFn func()) (err error) {
	if err := s.Err(); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			err = s.Err() // a guarded region lost a page during the copy
		}
	}()
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if re, ok := p.(runtime.Error); ok {
				if _, fault := re.(interface{ Addr() uintptr }); fault {
					err = s.region.truncated()
					return
				}
			}
			panic(p)
		}
	}()
	copyFn()
	return nil
}

// truncated is the error of a use of r after its object shrank.
func (r *region) truncated() error {
	return faultError{&core.Error{Code: core.CodeInternal, Msg: "shared memory region '" + r.status.Name +
		"' is no longer backed by its object: it was truncated"}}
}

// faultError is the client's error for a fault, matching ErrFault too.
type faultError struct{ e *core.Error }

func (f faultError) Error() string   { return f.e.Msg }
func (f faultError) Unwrap() []error { return []error{f.e, ErrFault} }

// Release lets the region go; later calls do nothing.
func (s *Span) Release() {
	s.once.Do(s.region.users.Done)
}

// close unmaps or closes the region once nobody uses it.
func (r *region) close() error {
	if r.dev != nil {
		return r.dev.Close()
	}
	r.guard.release()
	if err := unix.Munmap(r.mem); err != nil {
		return &core.Error{Code: core.CodeInternal, Msg: "unable to munmap shared memory region, errno: " + err.Error()}
	}
	return nil
}

// validKey applies Triton's key rule (ValidateSharedMemoryKey in
// triton-inference-server/server src/common.cc).
func validKey(name, key string) error {
	rest := strings.TrimLeft(key, "/")
	if rest == "" {
		return &core.Error{Code: core.CodeInvalidArg,
			Msg: "cannot register shared memory region '" + name + "' - invalid shm key '" + key + "'"}
	}
	if strings.HasPrefix(rest, reservedPrefix) {
		return &core.Error{Code: core.CodeInvalidArg, Msg: "cannot register shared memory region '" + name +
			"' with key '" + key + "' as the key contains the reserved prefix '" + reservedPrefix + "'"}
	}
	return nil
}

// mapObject opens key in /dev/shm as shm_open(3) does (leading slashes
// dropped; a name with a slash, "." or ".." refused; symlinks not
// followed), checks the object holds offset+byteSize bytes, and maps them.
// The mapping starts at the page holding offset, since mmap takes
// page-aligned offsets only; data is the registered bytes within it.
func mapObject(name, key string, offset, byteSize uint64) (mem, data []byte, err error) {
	obj := strings.TrimLeft(key, "/")
	if strings.Contains(obj, "/") || obj == "." || obj == ".." {
		return nil, nil, cannotOpen(key)
	}
	f, err := os.OpenFile(dir+"/"+obj, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, cannotOpen(key)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < 0 || !fi.Mode().IsRegular() {
		return nil, nil, &core.Error{Code: core.CodeInternal, Msg: "Invalid shared memory region: '" + key + "'"}
	}
	if byteSize > math.MaxUint64-offset || offset+byteSize > uint64(fi.Size()) {
		return nil, nil, &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register shared memory region '" + name + "': invalid args"}
	}
	if byteSize == 0 {
		// mmap refuses an empty mapping: Triton's error is mmap's EINVAL.
		return nil, nil, &core.Error{Code: core.CodeInvalidArg,
			Msg: "failed to register shared memory region '" + name + "': unable to process address space" + unix.EINVAL.Error()}
	}
	page := uint64(os.Getpagesize())
	start := offset - offset%page
	length := offset - start + byteSize
	if length > math.MaxInt {
		return nil, nil, &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register shared memory region '" + name + "': invalid args"}
	}
	mem, err = unix.Mmap(int(f.Fd()), int64(start), int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, &core.Error{Code: core.CodeInvalidArg,
			Msg: "failed to register shared memory region '" + name + "': unable to process address space" + err.Error()}
	}
	return mem, mem[offset-start:], nil
}

func cannotOpen(key string) error {
	return &core.Error{Code: core.CodeInternal, Msg: "Unable to open shared memory region: '" + key + "'"}
}
