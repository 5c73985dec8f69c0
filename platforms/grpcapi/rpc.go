package grpcapi

import (
	"context"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/protocol"
)

// ServerLive answers the server's liveness (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterServerLive).
func (s *Server) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	live, err := protocol.ServerLive(s.core, s.exiting.Load())
	if err != nil {
		return nil, statusError(err)
	}
	return &pb.ServerLiveResponse{Live: live}, nil
}

// ServerReady answers the server's readiness (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterServerReady).
func (s *Server) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	ready, err := protocol.ServerReady(s.core, s.exiting.Load())
	if err != nil {
		return nil, statusError(err)
	}
	return &pb.ServerReadyResponse{Ready: ready}, nil
}

// ModelReady answers whether a model version can serve; unknown is not
// ready, and an exiting server is UNAVAILABLE (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelReady).
func (s *Server) ModelReady(_ context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	version, err := protocol.ParseVersion(req.GetVersion())
	if err != nil {
		return nil, statusError(err)
	}
	ready, err := protocol.ModelReadiness(s.core, req.GetName(), version, s.exiting.Load())
	if err != nil {
		return nil, statusError(err)
	}
	return &pb.ModelReadyResponse{Ready: ready}, nil
}

// ServerMetadata answers the metadata computed at start (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterServerMetadata).
func (s *Server) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return s.meta, nil
}

// ModelMetadata answers a model's metadata (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelMetadata).
func (s *Server) ModelMetadata(_ context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	version, err := protocol.ParseVersion(req.GetVersion())
	if err != nil {
		return nil, statusError(err)
	}
	md, err := protocol.ModelMetadata(s.core, req.GetName(), version)
	if err != nil {
		return nil, statusError(err)
	}
	return &pb.ModelMetadataResponse{
		Name: md.Name, Versions: md.Versions, Platform: md.Platform,
		Inputs: tensorMetadata(md.Inputs), Outputs: tensorMetadata(md.Outputs),
	}, nil
}

func tensorMetadata(ts []protocol.TensorMeta) []*pb.ModelMetadataResponse_TensorMetadata {
	out := make([]*pb.ModelMetadataResponse_TensorMetadata, len(ts))
	for i, t := range ts {
		out[i] = &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
	}
	return out
}

// ModelConfig answers a model's effective configuration (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelConfig).
func (s *Server) ModelConfig(_ context.Context, req *pb.ModelConfigRequest) (*pb.ModelConfigResponse, error) {
	version, err := protocol.ParseVersion(req.GetVersion())
	if err != nil {
		return nil, statusError(err)
	}
	cfg, err := protocol.ModelConfig(s.core, req.GetName(), version)
	if err != nil {
		return nil, statusError(err)
	}
	return &pb.ModelConfigResponse{Config: cfg}, nil
}

// ModelStatistics answers the statistics of READY versions (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelStatistics).
func (s *Server) ModelStatistics(_ context.Context, req *pb.ModelStatisticsRequest) (*pb.ModelStatisticsResponse, error) {
	version, err := protocol.ParseVersion(req.GetVersion())
	if err != nil {
		return nil, statusError(err)
	}
	stats, err := protocol.ModelStatistics(s.core, req.GetName(), version)
	if err != nil {
		return nil, statusError(err)
	}
	out := &pb.ModelStatisticsResponse{ModelStats: make([]*pb.ModelStatistics, len(stats))}
	for i, st := range stats {
		in := st.Inference
		ms := &pb.ModelStatistics{
			Name: st.Name, Version: st.Version, LastInference: uint64(max(st.LastInference, 0)),
			InferenceCount: st.InferenceCount, ExecutionCount: st.ExecutionCount,
			InferenceStats: &pb.InferStatistics{
				Success: duration(in.Success), Fail: duration(in.Fail), Queue: duration(in.Queue),
				ComputeInput: duration(in.ComputeInput), ComputeInfer: duration(in.ComputeInfer), ComputeOutput: duration(in.ComputeOutput),
				CacheHit: duration(in.CacheHit), CacheMiss: duration(in.CacheMiss),
			},
			BatchStats:    make([]*pb.InferBatchStatistics, len(st.Batches)),
			MemoryUsage:   []*pb.MemoryUsage{},
			ResponseStats: map[string]*pb.InferResponseStatistics{},
		}
		for j, b := range st.Batches {
			ms.BatchStats[j] = &pb.InferBatchStatistics{
				BatchSize:    b.BatchSize,
				ComputeInput: duration(b.ComputeInput), ComputeInfer: duration(b.ComputeInfer), ComputeOutput: duration(b.ComputeOutput),
			}
		}
		out.ModelStats[i] = ms
	}
	return out, nil
}

func duration(d core.Duration) *pb.StatisticDuration {
	return &pb.StatisticDuration{Count: d.Count, Ns: d.Ns}
}

// RepositoryIndex lists the repository's models (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterRepositoryIndex).
func (s *Server) RepositoryIndex(ctx context.Context, req *pb.RepositoryIndexRequest) (*pb.RepositoryIndexResponse, error) {
	if req.GetRepositoryName() != "" {
		return nil, statusError(protocol.ErrRepositoryName)
	}
	entries, err := protocol.RepositoryIndex(ctx, s.core, req.GetReady())
	if err != nil {
		return nil, statusError(err)
	}
	out := &pb.RepositoryIndexResponse{Models: make([]*pb.RepositoryIndexResponse_ModelIndex, len(entries))}
	for i, e := range entries {
		out.Models[i] = &pb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason}
	}
	return out, nil
}

// RepositoryModelLoad loads a model, synchronously; the load outlives a
// cancelled call (triton-inference-server/server src/grpc/grpc_server.cc,
// RegisterRepositoryModelLoad).
func (s *Server) RepositoryModelLoad(ctx context.Context, req *pb.RepositoryModelLoadRequest) (*pb.RepositoryModelLoadResponse, error) {
	if req.GetRepositoryName() != "" {
		return nil, statusError(protocol.ErrRepositoryName)
	}
	ov, err := protocol.ReadLoadParams(repositoryParams(req.GetParameters()), protocol.GRPCRules)
	if err != nil {
		return nil, statusError(err)
	}
	if err := protocol.Load(ctx, s.core, req.GetModelName(), ov); err != nil {
		return nil, statusError(err)
	}
	return &pb.RepositoryModelLoadResponse{}, nil
}

// RepositoryModelUnload unloads a model, synchronously (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterRepositoryModelUnload).
func (s *Server) RepositoryModelUnload(ctx context.Context, req *pb.RepositoryModelUnloadRequest) (*pb.RepositoryModelUnloadResponse, error) {
	if req.GetRepositoryName() != "" {
		return nil, statusError(protocol.ErrRepositoryName)
	}
	dependents, err := protocol.ReadUnloadParams(repositoryParams(req.GetParameters()), protocol.GRPCRules)
	if err != nil {
		return nil, statusError(err)
	}
	if err := protocol.Unload(ctx, s.core, req.GetModelName(), dependents); err != nil {
		return nil, statusError(err)
	}
	return &pb.RepositoryModelUnloadResponse{}, nil
}

func repositoryParams(in map[string]*pb.ModelRepositoryParameter) map[string]protocol.Param {
	out := make(map[string]protocol.Param, len(in))
	for k, p := range in {
		var v protocol.Param
		switch c := p.GetParameterChoice().(type) {
		case *pb.ModelRepositoryParameter_BoolParam:
			v = protocol.Param{Kind: protocol.ParamBool, Bool: c.BoolParam}
		case *pb.ModelRepositoryParameter_Int64Param:
			v = protocol.Param{Kind: protocol.ParamInt64, Int64: c.Int64Param}
		case *pb.ModelRepositoryParameter_StringParam:
			v = protocol.Param{Kind: protocol.ParamString, String: c.StringParam}
		case *pb.ModelRepositoryParameter_BytesParam:
			v = protocol.Param{Kind: protocol.ParamBytes, Bytes: c.BytesParam}
		}
		out[k] = v
	}
	return out
}
