// Package grpcapi serves the KServe v2 / Triton gRPC protocol
// (inference.GRPCInferenceService of triton-inference-server/common
// protobuf/grpc_service.proto, and grpc.health.v1.Health)
// over the inference core. Inferences run through the one pipeline of
// platforms/infer and every other rule shared with HTTP comes from
// platforms/protocol; this package decodes protobuf messages into their calls
// and renders the results.
package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/serve"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/trace"
)

// Restriction is one --grpc-restricted-protocol group's metadata: the call
// must carry "triton-grpc-protocol-<Key>" with the first value Value.
type Restriction = protocol.Restriction

// Options configure the gRPC API.
type Options struct {
	// ServerID is the server metadata's "name" (--id; default "triton").
	ServerID string
	// Restricted maps a category (health, metadata, inference,
	// shared-memory, model-config, model-repository, statistics, trace,
	// logging) to the metadata it requires (triton-inference-server/server
	// docs/customization_guide/inference_protocols.md). Keys are
	// lower-cased, as gRPC metadata keys always are.
	Restricted map[string]Restriction
	// ResponseCompression is --grpc-infer-response-compression-level:
	// none (or ""), low, medium or high, any case; it decides how
	// ModelInfer and ModelStreamInfer responses are compressed
	// (triton-inference-server/server src/command_line_parser.cc). Other
	// values count as none.
	ResponseCompression string
	Logger              *slog.Logger
	// Logs are the run-time log settings LogSettings reads and changes
	// (those of Logger's handler); fresh defaults when nil.
	Logs *logging.Settings
	// HeaderForward is --grpc-header-forward-pattern; nil forwards nothing.
	HeaderForward *protocol.HeaderForwarder
	// Trace holds the trace settings and samples inference requests
	// (triton-inference-server/server docs/protocol/extension_trace.md); a
	// manager with tracing OFF when nil.
	Trace *trace.Manager
	// LoadReports puts an ORCA load report in the trailer of ModelInfer
	// calls (every call, or only those that ask: see
	// orca.Options.TrailerOnlyWhenAsked) and serves the out-of-band
	// xds.service.orca.v3.OpenRcaService with the process's figures; nil:
	// neither (metrics off).
	LoadReports *orca.Reporter
	// SharedMemory holds the client shared-memory regions, one table for
	// both frontends (--allow-client-shm); nil: the extension is off and
	// its routes answer as a Triton started without the flag.
	SharedMemory *shm.Manager
	// ConnQueueBytes bounds the decoupled responses all the streams of one
	// client connection hold unread; 0: serve.ConnQueueBytes.
	ConnQueueBytes int64
}

// Server implements inference.GRPCInferenceService over the core.
type Server struct {
	pb.UnimplementedGRPCInferenceServiceServer
	core    *core.Server
	opts    Options
	log     *slog.Logger
	logs    *logging.Settings
	exiting atomic.Bool
	// drain is closed by SetExiting: it ends the out-of-band load report
	// streams, which would otherwise hold the listener's graceful stop.
	drain     chan struct{}
	drainOnce sync.Once
	meta      *pb.ServerMetadataResponse
	calls     atomic.Uint64 // numbers the calls in the verbose log
	pipe      infer.Pipeline
	conns     connBudgets // the unread responses of each connection's streams
}

// New builds the gRPC API over c.
func New(c *core.Server, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ServerID == "" {
		opts.ServerID = "triton"
	}
	restricted := make(map[string]Restriction, len(opts.Restricted))
	for cat, r := range opts.Restricted {
		restricted[cat] = Restriction{Key: strings.ToLower(r.Key), Value: r.Value}
	}
	opts.Restricted = restricted
	if opts.Trace == nil {
		opts.Trace, _ = trace.New(trace.DefaultConfig(), nil)
	}
	if opts.Logs == nil {
		opts.Logs = logging.New("", logging.Default())
	}
	opts.ResponseCompression = strings.ToLower(opts.ResponseCompression)
	if opts.ResponseCompression == "" || !ValidCompressionLevel(opts.ResponseCompression) {
		opts.ResponseCompression = CompressionNone
	}
	if opts.ConnQueueBytes <= 0 {
		opts.ConnQueueBytes = serve.ConnQueueBytes
	}
	md := protocol.ServerMetadata(opts.ServerID)
	return &Server{
		core: c, opts: opts, log: opts.Logger, logs: opts.Logs, drain: make(chan struct{}), conns: connBudgets{max: opts.ConnQueueBytes},
		meta: &pb.ServerMetadataResponse{Name: md.Name, Version: md.Version, Extensions: md.Extensions},
		pipe: infer.Pipeline{Core: c, Trace: opts.Trace, Logs: opts.Logs, Log: opts.Logger, Forward: opts.HeaderForward},
	}
}

// ServerOptions are the grpc.NewServer options the API needs: Triton's
// message size limits (MAX_GRPC_MESSAGE_SIZE, INT32_MAX, in
// triton-inference-server/server src/common.h), the interceptors of the
// restricted protocols and of draining, the codec that
// does not copy tensor contents (inferCodec), and the HTTP/2 settings
// for large tensors (transportOptions).
func (s *Server) ServerOptions() []grpc.ServerOption {
	return append(s.callOptions(), transportOptions()...)
}

// callOptions are ServerOptions with grpc-go's default HTTP/2 settings.
func (s *Server) callOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.ForceServerCodecV2(newInferCodec()),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ChainUnaryInterceptor(s.unaryGuard),
		grpc.ChainStreamInterceptor(s.streamGuard),
	}
}

// streamWorkers is how many goroutines serve the RPCs: long-lived ones,
// whose stacks have already grown to the depth of an inference call; a
// goroutine per RPC, grpc-go's default, grows its stack anew each time
// (runtime.newstack was 8% of a single-client ModelInfer's CPU). An RPC
// that finds every worker busy gets its own goroutine, as by default.
var streamWorkers = uint32(max(16, 4*runtime.GOMAXPROCS(0)))

// Register registers inference.GRPCInferenceService (serviceDesc) and
// grpc.health.v1 on g (built with ServerOptions, whose codec reads the
// inference requests).
func (s *Server) Register(g *grpc.Server) {
	g.RegisterService(serviceDesc(), s)
	healthpb.RegisterHealthServer(g, health{s: s})
	if s.opts.LoadReports != nil {
		versions := func() []*core.ModelVersion { return s.core.ReadyVersions("") }
		orca.NewService(s.opts.LoadReports, orca.ServiceOptions{Versions: versions, Done: s.drain}).Register(g)
	}
}

// SetExiting makes health answer "Server exiting" and ModelInfer refuse
// new requests while the server drains.
func (s *Server) SetExiting() {
	s.exiting.Store(true)
	s.drainOnce.Do(func() { close(s.drain) })
}

// statusError is err as a gRPC status: the code of its Triton error class
// (protocol.GRPCCode, as Triton's GrpcStatusUtil::CodeToStatus in
// triton-inference-server/server src/grpc/grpc_utils.cc) and its text
// unchanged. A gRPC status passes through.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		if _, ok := status.FromError(err); ok {
			return err
		}
	}
	return status.Error(codes.Code(protocol.GRPCStatus(protocol.ClassOf(err))), err.Error())
}

const servicePrefix = "/inference.GRPCInferenceService/"

// categories maps each RPC to its restricted category, as the
// handlers of triton-inference-server/server src/grpc/grpc_server.cc
// check them.
var categories = map[string]string{
	"ServerLive": "health", "ServerReady": "health", "ModelReady": "health",
	"ServerMetadata": "metadata", "ModelMetadata": "metadata",
	"ModelInfer": "inference", "ModelStreamInfer": "inference",
	"ModelConfig": "model-config", "ModelStatistics": "statistics",
	"RepositoryIndex": "model-repository", "RepositoryModelLoad": "model-repository", "RepositoryModelUnload": "model-repository",
	"SystemSharedMemoryStatus": "shared-memory", "SystemSharedMemoryRegister": "shared-memory", "SystemSharedMemoryUnregister": "shared-memory",
	"CudaSharedMemoryStatus": "shared-memory", "CudaSharedMemoryRegister": "shared-memory", "CudaSharedMemoryUnregister": "shared-memory",
	"TraceSetting": "trace", "LogSettings": "logging",
}

func category(fullMethod string) string {
	if rpc, ok := strings.CutPrefix(fullMethod, servicePrefix); ok {
		return categories[rpc]
	}
	if strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") {
		return "health"
	}
	return ""
}

// errDraining refuses a new ModelInfer while the server drains.
var errDraining = status.Error(codes.Unavailable, "GRPC server is shutting down and has stopped accepting new requests.")

// check runs the checks that precede everything else in a call: draining
// for ModelInfer, then the restriction of the call's category.
func (s *Server) check(ctx context.Context, fullMethod string) error {
	if fullMethod == servicePrefix+"ModelInfer" && s.exiting.Load() {
		return errDraining
	}
	res, ok := s.opts.Restricted[category(fullMethod)]
	if !ok {
		return nil
	}
	key := "triton-grpc-protocol-" + res.Key
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get(key); len(got) > 0 && got[0] == res.Value {
		return nil
	}
	return status.Error(codes.Unavailable, "This protocol is restricted, expecting header '"+key+"'")
}

func (s *Server) unaryGuard(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s.logCall(ctx, info.FullMethod) // Triton logs a call before checking it
	if err := s.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	if err := s.setSendCompressor(ctx, info.FullMethod); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return handler(ctx, req)
}

func (s *Server) streamGuard(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s.logCall(ss.Context(), info.FullMethod)
	if err := s.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if err := s.setSendCompressor(ss.Context(), info.FullMethod); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return handler(srv, guardedStream{ss})
}

// logCall writes Triton's verbose line for a call it starts processing
// (logging.Settings.LogRPC); with verbose logging off it is one atomic
// load.
func (s *Server) logCall(ctx context.Context, fullMethod string) {
	if s.logs.Verbose() == 0 {
		return
	}
	name, ok := strings.CutPrefix(fullMethod, "/"+pb.GRPCInferenceService_ServiceDesc.ServiceName+"/")
	if !ok {
		return // grpc.health.v1 and reflection: Triton logs nothing for them
	}
	switch name {
	case "ModelInfer", "ModelStreamInfer":
		name += "Handler" // Triton's names for its two inference handlers
	}
	s.logs.LogRPC(ctx, s.log, name, s.calls.Add(1)-1)
}

// health is grpc.health.v1.Health/Check answering the server's readiness
// whatever the service name (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterHealthCheck); Watch and List are
// UNIMPLEMENTED.
type health struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

func (h health) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	ready, err := protocol.ServerReady(h.s.core, h.s.exiting.Load())
	if err != nil {
		return nil, statusError(err)
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}
