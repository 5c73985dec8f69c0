package grpcapi

import (
	"context"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
)

// The shared-memory extension's RPCs (triton-inference-server/server
// docs/protocol/extension_shared_memory.md), answered as the
// SharedMemory handlers of src/grpc/grpc_server.cc answer them, on the
// region table the HTTP routes share. Options.SharedMemory nil is
// --allow-client-shm=false: status answers (no regions), register and
// unregister are refused.

// SystemSharedMemoryStatus answers the system regions, or the one named,
// keyed by name.
func (s *Server) SystemSharedMemoryStatus(_ context.Context, req *pb.SystemSharedMemoryStatusRequest) (*pb.SystemSharedMemoryStatusResponse, error) {
	regions, err := protocol.ShmStatus(s.opts.SharedMemory, shm.System, req.GetName())
	if err != nil {
		return nil, statusError(err)
	}
	out := make(map[string]*pb.SystemSharedMemoryStatusResponse_RegionStatus, len(regions))
	for _, r := range regions {
		out[r.Name] = &pb.SystemSharedMemoryStatusResponse_RegionStatus{Name: r.Name, Key: r.Key, Offset: r.Offset, ByteSize: r.ByteSize}
	}
	return &pb.SystemSharedMemoryStatusResponse{Regions: out}, nil
}

// SystemSharedMemoryRegister registers a POSIX shared-memory object.
func (s *Server) SystemSharedMemoryRegister(_ context.Context, req *pb.SystemSharedMemoryRegisterRequest) (*pb.SystemSharedMemoryRegisterResponse, error) {
	if err := protocol.ShmRegisterSystem(s.opts.SharedMemory, req.GetName(), req.GetKey(), req.GetOffset(), req.GetByteSize()); err != nil {
		return nil, statusError(err)
	}
	return &pb.SystemSharedMemoryRegisterResponse{}, nil
}

// SystemSharedMemoryUnregister unregisters one system region, or all of
// them when the name is empty; it returns once no request uses them.
func (s *Server) SystemSharedMemoryUnregister(ctx context.Context, req *pb.SystemSharedMemoryUnregisterRequest) (*pb.SystemSharedMemoryUnregisterResponse, error) {
	if err := protocol.ShmUnregister(ctx, s.opts.SharedMemory, shm.System, req.GetName()); err != nil {
		return nil, statusError(err)
	}
	return &pb.SystemSharedMemoryUnregisterResponse{}, nil
}

// CudaSharedMemoryStatus answers the CUDA regions, or the one named, keyed
// by name.
func (s *Server) CudaSharedMemoryStatus(_ context.Context, req *pb.CudaSharedMemoryStatusRequest) (*pb.CudaSharedMemoryStatusResponse, error) {
	regions, err := protocol.ShmStatus(s.opts.SharedMemory, shm.CUDA, req.GetName())
	if err != nil {
		return nil, statusError(err)
	}
	out := make(map[string]*pb.CudaSharedMemoryStatusResponse_RegionStatus, len(regions))
	for _, r := range regions {
		out[r.Name] = &pb.CudaSharedMemoryStatusResponse_RegionStatus{Name: r.Name, DeviceId: uint64(r.DeviceID), ByteSize: r.ByteSize}
	}
	return &pb.CudaSharedMemoryStatusResponse{Regions: out}, nil
}

// CudaSharedMemoryRegister registers a CUDA IPC handle. With client
// shared memory off it answers as Triton's builds do: a GPU build (here: a
// host whose GPUs KIND_GPU models may use) that the switch is off, a
// CPU-only build its refusal (src/grpc/grpc_server.cc,
// RegisterCudaSharedMemoryRegister).
func (s *Server) CudaSharedMemoryRegister(_ context.Context, req *pb.CudaSharedMemoryRegisterRequest) (*pb.CudaSharedMemoryRegisterResponse, error) {
	if s.opts.SharedMemory == nil && len(s.core.GPUs()) > 0 {
		return nil, statusError(protocol.ErrShmDisabled)
	}
	if err := protocol.ShmRegisterCUDA(s.opts.SharedMemory, req.GetName(), req.GetRawHandle(), req.GetDeviceId(), req.GetByteSize()); err != nil {
		return nil, statusError(err)
	}
	return &pb.CudaSharedMemoryRegisterResponse{}, nil
}

// CudaSharedMemoryUnregister unregisters one CUDA region, or all of them
// when the name is empty.
func (s *Server) CudaSharedMemoryUnregister(ctx context.Context, req *pb.CudaSharedMemoryUnregisterRequest) (*pb.CudaSharedMemoryUnregisterResponse, error) {
	if err := protocol.ShmUnregister(ctx, s.opts.SharedMemory, shm.CUDA, req.GetName()); err != nil {
		return nil, statusError(err)
	}
	return &pb.CudaSharedMemoryUnregisterResponse{}, nil
}
