package protocol

import (
	"context"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/shm"
)

// The shared-memory extension's region calls, shared by both transports
// (triton-inference-server/server docs/protocol/extension_shared_memory.md).
// m is the server's one region table; nil means --allow-client-shm=false,
// where Triton still answers status from its (empty) table and refuses
// register and unregister with kClientShmDisabledErrorStr (src/common.h).

// ShmDisabled refuses registering and unregistering a region while client
// shared memory is off.
const ShmDisabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."

// ErrShmDisabled is ShmDisabled as an error (UNSUPPORTED: HTTP 501,
// gRPC UNIMPLEMENTED).
var ErrShmDisabled = core.Errorf(core.CodeUnsupported, ShmDisabled)

// cudaIPCHandleSize is sizeof(cudaIpcMemHandle_t), the only raw handle size
// Triton accepts.
const cudaIPCHandleSize = 64

// ShmRegionNotFound answers the status of a region that is not registered.
// kind is "system" or "cuda".
func ShmRegionNotFound(kind, region string) *core.Error {
	return &core.Error{Code: core.CodeNotFound, Msg: "Unable to find " + kind + " shared memory region: '" + region + "'"}
}

// ShmCUDAUnsupported refuses registering a CUDA region where no GPU can
// open it (Triton's CPU-only build; gRPC checks it before the client-shm
// switch: src/grpc/grpc_server.cc, RegisterCudaSharedMemoryRegister).
func ShmCUDAUnsupported(region string) *core.Error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register CUDA shared memory region: '" + region + "', GPUs not supported"}
}

// ErrShmBadHandle refuses a CUDA raw handle that is not a
// cudaIpcMemHandle_t's size (src/http_server.cc, HandleCudaSharedMemory).
var ErrShmBadHandle = core.Errorf(core.CodeInvalidArg, "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")

// ShmStatus lists the regions of kind (all, or the one named name), as
// the status routes report them. It works with the extension off, on an
// empty table, as Triton's does.
func ShmStatus(m *shm.Manager, kind shm.Kind, name string) ([]shm.Status, error) {
	if m == nil {
		if name != "" {
			return nil, ShmRegionNotFound(kind.String(), name)
		}
		return []shm.Status{}, nil
	}
	return m.Status(kind, name)
}

// ShmRegisterSystem registers byteSize bytes at offset of the POSIX
// shared-memory object key as region name.
func ShmRegisterSystem(m *shm.Manager, name, key string, offset, byteSize uint64) error {
	if m == nil {
		return ErrShmDisabled
	}
	return m.RegisterSystem(name, key, offset, byteSize)
}

// ShmCUDASupported reports whether a CUDA region can be registered at all:
// false is Triton's CPU-only build, which refuses before reading the
// request.
func ShmCUDASupported(m *shm.Manager) bool { return m != nil && m.HasDevice() }

// ShmRegisterCUDA registers the CUDA IPC handle of byteSize bytes on device
// deviceID as region name. Without a device it answers the CPU-only
// build's refusal, which gRPC gives even with the extension off.
func ShmRegisterCUDA(m *shm.Manager, name string, handle []byte, deviceID int64, byteSize uint64) error {
	if !ShmCUDASupported(m) {
		return ShmCUDAUnsupported(name)
	}
	if len(handle) != cudaIPCHandleSize {
		return ErrShmBadHandle
	}
	return m.RegisterCUDA(name, handle, deviceID, byteSize)
}

// ShmUnregister unregisters region name of kind, or every region of kind
// when name is empty; a region not registered is not an error. It returns
// once the requests using the regions have let them go, or when ctx ends.
func ShmUnregister(ctx context.Context, m *shm.Manager, kind shm.Kind, name string) error {
	if m == nil {
		return ErrShmDisabled
	}
	return m.Unregister(ctx, kind, name)
}

// WriteRegions copies the outputs that go to shared memory (span gives an
// output's region, nil for one not in shared memory) into their regions,
// once every one is known to fit, with the error of Triton's response
// allocators (RegionTooSmall) for one that does not.
func WriteRegions(outputs []*core.Tensor, span func(name string) *shm.Span) error {
	for _, t := range outputs {
		if s := span(t.Name); s != nil && uint64(t.ByteLen()) > s.Len() {
			return RegionTooSmall(t.Name, s.Len(), t.ByteLen())
		}
	}
	for _, t := range outputs {
		s := span(t.Name)
		switch {
		case s == nil:
		case t.Device != nil && t.Device.Addr() == s.Addr() && t.Device.DeviceID() == s.DeviceID():
			// A GPU backend wrote it in the region (RequestedOutput.IntoDevice).
		default:
			if err := t.OnHost(); err != nil {
				return &core.Error{Code: core.CodeInternal, Msg: err.Error()}
			}
			if err := shm.WriteOutput(s, t.Data); err != nil {
				return err
			}
		}
	}
	return nil
}
