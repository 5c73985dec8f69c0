package v2

import "github.com/inferd/inferd/core"

// Client shared memory is not implemented: both transports answer as a
// Triton started without --allow-client-shm on a CPU-only build
// (triton-inference-server/server docs/protocol/extension_shared_memory.md;
// the refusal text is kClientShmDisabledErrorStr in src/common.h).

// ShmDisabled refuses registering and unregistering a region.
const ShmDisabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."

// ErrShmDisabled is ShmDisabled as an error (UNSUPPORTED: HTTP 501,
// gRPC UNIMPLEMENTED).
var ErrShmDisabled = core.Errorf(core.CodeUnsupported, ShmDisabled)

// ShmRegionNotFound answers the status of a named region: none can be
// registered. kind is "system" or "cuda".
func ShmRegionNotFound(kind, region string) *core.Error {
	return &core.Error{Code: core.CodeNotFound, Msg: "Unable to find " + kind + " shared memory region: '" + region + "'"}
}

// ShmCUDAUnsupported refuses registering a CUDA region on a CPU-only build
// (gRPC checks it before the client-shm switch: triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterCudaSharedMemoryRegister).
func ShmCUDAUnsupported(region string) *core.Error {
	return &core.Error{Code: core.CodeInvalidArg, Msg: "failed to register CUDA shared memory region: '" + region + "', GPUs not supported"}
}
