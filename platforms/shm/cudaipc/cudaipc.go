// Package cudaipc opens the CUDA regions of the shared-memory extension:
// a client allocates device memory, exports it with cudaIpcGetMemHandle
// and registers the 64-byte handle; the server opens it with
// cudaIpcOpenMemHandle and copies tensors between it and host memory
// (OpenCudaIPCRegion and CheckCudaSharedMemoryRegionSize in
// triton-inference-server/server src/shared_memory_manager.cc).
//
// The CUDA runtime (libcudart) and driver (libcuda) are loaded at run time
// with dlopen, not linked: one binary serves CPU-only hosts, where Load
// fails and CUDA regions are refused as Triton's CPU-only build refuses
// them, and GPU hosts, where the runtime is the one ONNX Runtime's CUDA
// provider already loads (the nvidia-cuda-runtime wheel or the CUDA
// toolkit, on the loader's path).
package cudaipc

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// cudaIpcMemHandle_t: 64 opaque bytes, passed by value.
typedef struct { char reserved[64]; } inferd_ipc_handle;

static struct {
	int ok;
	char why[256];
	int (*getDeviceCount)(int*);
	int (*setDevice)(int);
	int (*ipcOpen)(void**, inferd_ipc_handle, unsigned int);
	int (*ipcClose)(void*);
	int (*ipcGet)(inferd_ipc_handle*, void*);
	int (*memcpy)(void*, const void*, size_t, int);
	int (*malloc)(void**, size_t);
	int (*free)(void*);
	const char* (*errorString)(int);
	int (*getLastError)(void);
	int (*peekAtLastError)(void);
	int (*addressRange)(unsigned long long*, size_t*, unsigned long long);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void* cu_sym(void* lib, const char* name) {
	void* p = dlsym(lib, name);
	if (p == NULL && cu.why[0] == 0) {
		strncpy(cu.why, name, sizeof cu.why - 1);
	}
	return p;
}

static void cu_load(void) {
	// CUDA 13 first (the CUDA provider inferd ships is built for it), then 12.
	const char* names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
	void* rt = NULL;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && rt == NULL; i++) {
		rt = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (rt == NULL) {
		strncpy(cu.why, "libcudart.so.13 or .12 not found on the loader's path", sizeof cu.why - 1);
		return;
	}
	void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (drv == NULL) {
		strncpy(cu.why, "libcuda.so.1 (the NVIDIA driver) not found", sizeof cu.why - 1);
		return;
	}
	cu.getDeviceCount = cu_sym(rt, "cudaGetDeviceCount");
	cu.setDevice = cu_sym(rt, "cudaSetDevice");
	cu.ipcOpen = cu_sym(rt, "cudaIpcOpenMemHandle");
	cu.ipcClose = cu_sym(rt, "cudaIpcCloseMemHandle");
	cu.ipcGet = cu_sym(rt, "cudaIpcGetMemHandle");
	cu.memcpy = cu_sym(rt, "cudaMemcpy");
	cu.malloc = cu_sym(rt, "cudaMalloc");
	cu.free = cu_sym(rt, "cudaFree");
	cu.errorString = cu_sym(rt, "cudaGetErrorString");
	cu.getLastError = cu_sym(rt, "cudaGetLastError");
	cu.peekAtLastError = cu_sym(rt, "cudaPeekAtLastError");
	cu.addressRange = cu_sym(drv, "cuMemGetAddressRange_v2");
	if (cu.why[0] == 0) {
		cu.ok = 1;
	}
}

static int cu_init(char* why, size_t n) {
	pthread_once(&cu_once, cu_load);
	if (!cu.ok) {
		strncpy(why, cu.why, n - 1);
		why[n - 1] = 0;
	}
	return cu.ok;
}

static const char* cu_error(int err) { return cu.errorString(err); }

static int cu_peek_last_error(void) { return cu.peekAtLastError(); }


// Each call below sets the device first, on the thread it runs on: Go
// moves goroutines between threads, and the runtime's current device is
// per thread. A failed call also clears the thread's last error, which
// the runtime keeps per thread too: ONNX Runtime's CUDA provider, running
// later on the same thread, checks cudaGetLastError after its kernels and
// would report our error as its own (seen on an H100: a refused handle
// failed the next inference of a KIND_GPU model).
static int cu_done(int err) {
	if (err != 0) {
		cu.getLastError();
	}
	return err;
}

static int cu_devices(int* n) { return cu_done(cu.getDeviceCount(n)); }

// cu_open opens an IPC handle; *size is the whole allocation it names
// (cuMemGetAddressRange of the opened pointer). addrErr reports the
// driver's error for the size query, 0 when it succeeded.
static int cu_open(int dev, const void* handle, void** ptr, size_t* size, int* addrErr) {
	inferd_ipc_handle h;
	memcpy(&h, handle, sizeof h);
	cu_done(cu.setDevice(dev));
	int err = cu_done(cu.ipcOpen(ptr, h, 1)); // cudaIpcMemLazyEnablePeerAccess
	if (err != 0) {
		return err;
	}
	unsigned long long base = 0;
	*addrErr = cu.addressRange(&base, size, (unsigned long long)(uintptr_t)*ptr);
	if (*addrErr == 0) {
		*size -= (size_t)((uintptr_t)*ptr - (uintptr_t)base);
	}
	return 0;
}

static int cu_close(int dev, void* ptr) {
	cu_done(cu.setDevice(dev));
	return cu_done(cu.ipcClose(ptr));
}

// kind: 1 host to device, 2 device to host (cudaMemcpyKind).
static int cu_copy(int dev, void* dst, const void* src, size_t n, int kind) {
	cu_done(cu.setDevice(dev));
	return cu_done(cu.memcpy(dst, src, n, kind));
}

static int cu_alloc(int dev, size_t n, void** ptr, void* handle) {
	cu_done(cu.setDevice(dev));
	int err = cu_done(cu.malloc(ptr, n));
	if (err != 0) {
		return err;
	}
	inferd_ipc_handle h;
	err = cu_done(cu.ipcGet(&h, *ptr));
	if (err != 0) {
		cu.free(*ptr);
		return err;
	}
	memcpy(handle, &h, sizeof h);
	return 0;
}

static int cu_free(int dev, void* ptr) {
	cu_done(cu.setDevice(dev));
	return cu_done(cu.free(ptr));
}
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"unsafe"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/shm"
)

// HandleSize is sizeof(cudaIpcMemHandle_t).
const HandleSize = 64

// ErrUnavailable marks a host where CUDA regions cannot be opened: no CUDA
// runtime or driver on the loader's path, or no device.
var ErrUnavailable = errors.New("cudaipc: CUDA unavailable")

// cudaMemcpyKind values.
const (
	hostToDevice = 1
	deviceToHost = 2
)

// Runtime is the loaded CUDA runtime; it opens CUDA regions for
// shm.Manager (shm.Device).
type Runtime struct {
	devices int
	log     *slog.Logger
}

// Load loads the CUDA runtime and counts the devices; ErrUnavailable
// (wrapped, with the reason) when there is no runtime, driver or device.
// log gets CUDA's reasons for refused handles, which clients do not see.
func Load(log *slog.Logger) (*Runtime, error) {
	var why [256]C.char
	if C.cu_init(&why[0], C.size_t(len(why))) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, C.GoString(&why[0]))
	}
	var n C.int
	if err := C.cu_devices(&n); err != 0 {
		return nil, fmt.Errorf("%w: cudaGetDeviceCount: %s", ErrUnavailable, cudaError(err))
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: no CUDA device", ErrUnavailable)
	}
	return &Runtime{devices: int(n), log: log}, nil
}

// lastError is the calling thread's last CUDA runtime error, left as it
// is (cudaPeekAtLastError); tests lock the goroutine to its thread.
func lastError() int { return int(C.cu_peek_last_error()) }

// Devices is the number of CUDA devices.
func (rt *Runtime) Devices() int { return rt.devices }

func cudaError(err C.int) string {
	return C.GoString(C.cu_error(err)) + fmt.Sprintf(" (cudaError %d)", int(err))
}

// refuse is Triton's answer when a handle cannot be opened (without the
// region's name) or is smaller than byte_size (with it): the client gets
// Triton's text alone, the log CUDA's reason, as Triton logs it.
func (rt *Runtime) refuse(name string, named bool, reason string) error {
	rt.log.Error("failed to register CUDA shared memory region", "region", name, "reason", reason)
	if !named {
		return &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register shared memory region: invalid args"}
	}
	return &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register shared memory region '" + name + "': invalid args"}
}

// Open opens handle as region name, byteSize bytes of device deviceID. A
// handle that does not open, a device that does not exist, or a byteSize
// past the end of the exported allocation fail with Triton's texts.
func (rt *Runtime) Open(name string, handle []byte, deviceID int64, byteSize uint64) (shm.DeviceMemory, error) {
	if len(handle) != HandleSize {
		return nil, rt.refuse(name, false, fmt.Sprintf("a handle of %d bytes", len(handle)))
	}
	if deviceID < 0 || deviceID >= int64(rt.devices) {
		return nil, rt.refuse(name, false, fmt.Sprintf("no CUDA device %d (%d present)", deviceID, rt.devices))
	}
	var (
		ptr     unsafe.Pointer
		size    C.size_t
		addrErr C.int
	)
	if err := C.cu_open(C.int(deviceID), unsafe.Pointer(unsafe.SliceData(handle)), &ptr, &size, &addrErr); err != 0 {
		return nil, rt.refuse(name, false, "cudaIpcOpenMemHandle: "+cudaError(err))
	}
	m := &memory{ptr: ptr, device: C.int(deviceID), size: byteSize}
	if addrErr != 0 || uint64(size) < byteSize {
		_ = m.Close()
		if addrErr != 0 {
			return nil, rt.refuse(name, true, fmt.Sprintf("cuMemGetAddressRange: CUresult %d", int(addrErr)))
		}
		return nil, rt.refuse(name, true, fmt.Sprintf("byte_size %d past the allocation's %d bytes", byteSize, uint64(size)))
	}
	return m, nil
}

// memory is one opened region.
type memory struct {
	ptr    unsafe.Pointer
	device C.int
	size   uint64

	once sync.Once
}

func (m *memory) Ptr() uintptr { return uintptr(m.ptr) }

func (m *memory) check(offset uint64, n int) error {
	if offset > m.size || uint64(n) > m.size-offset {
		return fmt.Errorf("cudaipc: %d bytes at offset %d of a region of %d", n, offset, m.size)
	}
	return nil
}

// CopyOut copies len(dst) bytes at offset of the region to dst.
func (m *memory) CopyOut(dst []byte, offset uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := m.check(offset, len(dst)); err != nil {
		return err
	}
	if err := C.cu_copy(m.device, unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Add(m.ptr, offset), C.size_t(len(dst)), deviceToHost); err != 0 {
		return &core.Error{Code: core.CodeInternal, Msg: "failed to copy from CUDA shared memory: " + cudaError(err)}
	}
	return nil
}

// CopyIn copies src to offset of the region.
func (m *memory) CopyIn(offset uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := m.check(offset, len(src)); err != nil {
		return err
	}
	if err := C.cu_copy(m.device, unsafe.Add(m.ptr, offset), unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)), hostToDevice); err != 0 {
		return &core.Error{Code: core.CodeInternal, Msg: "failed to copy to CUDA shared memory: " + cudaError(err)}
	}
	return nil
}

// Close closes the IPC mapping (cudaIpcCloseMemHandle); later calls do
// nothing.
func (m *memory) Close() error {
	var err error
	m.once.Do(func() {
		if e := C.cu_close(m.device, m.ptr); e != 0 {
			err = &core.Error{Code: core.CodeInternal, Msg: "failed to close CUDA IPC handle: " + cudaError(e)}
		}
	})
	return err
}

// Allocation is device memory exported as an IPC handle: the client's side
// of a CUDA region (what tritonclient's cuda_shared_memory module does),
// for tests and load generators. A handle opens only in another process.
type Allocation struct {
	memory
	handle [HandleSize]byte
}

// Alloc allocates size bytes on device deviceID and exports them.
func (rt *Runtime) Alloc(deviceID int, size uint64) (*Allocation, error) {
	if deviceID < 0 || deviceID >= rt.devices {
		return nil, fmt.Errorf("cudaipc: no CUDA device %d", deviceID)
	}
	a := &Allocation{memory: memory{device: C.int(deviceID), size: size}}
	var ptr unsafe.Pointer
	if err := C.cu_alloc(C.int(deviceID), C.size_t(size), &ptr, unsafe.Pointer(&a.handle[0])); err != 0 {
		return nil, fmt.Errorf("cudaipc: allocating %d bytes on device %d: %s", size, deviceID, cudaError(err))
	}
	a.ptr = ptr
	return a, nil
}

// Handle is the allocation's IPC handle, as a client registers it.
func (a *Allocation) Handle() []byte { return a.handle[:] }

// Free frees the allocation; later calls do nothing.
func (a *Allocation) Free() error {
	var err error
	a.once.Do(func() {
		if e := C.cu_free(a.device, a.ptr); e != 0 {
			err = fmt.Errorf("cudaipc: cudaFree: %s", cudaError(e))
		}
	})
	return err
}
