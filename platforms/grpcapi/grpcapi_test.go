package grpcapi

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

const simpleConfig = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

func simpleModel() servertest.Model {
	return servertest.Model{Config: simpleConfig, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))}
}

type harness struct {
	core   *core.Server
	api    *Server
	conn   *grpc.ClientConn
	client pb.GRPCInferenceServiceClient
	health healthpb.HealthClient
}

// start serves the API over a loopback listener, over a core with `simple`.
func start(t *testing.T, o servertest.Options, opts Options) *harness {
	t.Helper()
	if o.Repo == "" {
		o.Repo = servertest.WriteRepo(t, map[string]servertest.Model{"simple": simpleModel()})
	}
	c := servertest.Start(t, o)
	api := New(c, opts)
	g := grpc.NewServer(api.ServerOptions()...)
	api.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(t, err)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	servertest.Must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &harness{core: c, api: api, conn: conn, client: pb.NewGRPCInferenceServiceClient(conn), health: healthpb.NewHealthClient(conn)}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// wantStatus checks err's code and message.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || st.Message() != msg {
		t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), code, msg)
	}
}

func int32s(vals []int32) []byte {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func decodeInt32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func simpleInputs() (a, b []int32) {
	a, b = make([]int32, 16), make([]int32, 16)
	for i := range a {
		a[i], b[i] = int32(i), 1
	}
	return a, b
}

func simpleRequest(raw bool) *pb.ModelInferRequest {
	a, b := simpleInputs()
	req := &pb.ModelInferRequest{ModelName: "simple", Id: "7", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
	}}
	if raw {
		req.RawInputContents = [][]byte{int32s(a), int32s(b)}
	} else {
		req.Inputs[0].Contents = &pb.InferTensorContents{IntContents: a}
		req.Inputs[1].Contents = &pb.InferTensorContents{IntContents: b}
	}
	return req
}

func checkSimple(t *testing.T, resp *pb.ModelInferResponse) {
	t.Helper()
	if resp.ModelName != "simple" || resp.ModelVersion != "1" || resp.Id != "7" {
		t.Fatalf("response header %q %q %q", resp.ModelName, resp.ModelVersion, resp.Id)
	}
	if len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 {
		t.Fatalf("%d outputs, %d raw", len(resp.Outputs), len(resp.RawOutputContents))
	}
	a, b := simpleInputs()
	for i, o := range resp.Outputs {
		if o.Datatype != "INT32" || len(o.Shape) != 2 || o.Shape[0] != 1 || o.Shape[1] != 16 || o.Contents != nil {
			t.Fatalf("output %v", o)
		}
		got := decodeInt32s(resp.RawOutputContents[i])
		for j := range got {
			want := a[j] + b[j]
			if o.Name == "OUTPUT1" {
				want = a[j] - b[j]
			}
			if got[j] != want {
				t.Fatalf("%s[%d] = %d, want %d", o.Name, j, got[j], want)
			}
		}
	}
}

func TestHealthAndMetadata(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c := ctx(t)
	live, err := h.client.ServerLive(c, &pb.ServerLiveRequest{})
	if err != nil || !live.Live {
		t.Fatal(live, err)
	}
	ready, err := h.client.ServerReady(c, &pb.ServerReadyRequest{})
	if err != nil || !ready.Ready {
		t.Fatal(ready, err)
	}
	for _, svc := range []string{"", "anything"} {
		hc, err := h.health.Check(c, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatal(hc, err)
		}
	}
	md, err := h.client.ServerMetadata(c, &pb.ServerMetadataRequest{})
	if err != nil || md.Name != "triton" || len(md.Extensions) == 0 {
		t.Fatal(md, err)
	}
	mr, err := h.client.ModelReady(c, &pb.ModelReadyRequest{Name: "nope"})
	if err != nil || mr.Ready {
		t.Fatal(mr, err)
	}
	mr, err = h.client.ModelReady(c, &pb.ModelReadyRequest{Name: "simple"})
	if err != nil || !mr.Ready {
		t.Fatal(mr, err)
	}
	_, err = h.client.ModelReady(c, &pb.ModelReadyRequest{Name: "simple", Version: "-1"})
	wantStatus(t, err, codes.InvalidArgument, "invalid model version specified '-1' , version should be an integral value > 0")
	mm, err := h.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "simple", Version: "1abc"})
	if err != nil || len(mm.Versions) != 1 || mm.Versions[0] != "1" || mm.Inputs[0].Datatype != "INT32" || len(mm.Inputs[0].Shape) != 2 || mm.Inputs[0].Shape[0] != -1 {
		t.Fatal(mm, err)
	}
	_, err = h.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "nope"})
	wantStatus(t, err, codes.NotFound, "Request for unknown model: 'nope' is not found")
	cfg, err := h.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "simple"})
	if err != nil || cfg.Config.GetMaxBatchSize() != 8 || cfg.Config.GetInput()[0].GetDims()[0] != 16 {
		t.Fatal(cfg, err)
	}
	_, err = h.client.ModelStatistics(c, &pb.ModelStatisticsRequest{Name: "nope"})
	wantStatus(t, err, codes.InvalidArgument, "requested model 'nope' is not available")
	_, err = h.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{RepositoryName: "x"})
	wantStatus(t, err, codes.Unimplemented, "'repository_name' specification is not supported")
	_, err = h.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "simple"})
	wantStatus(t, err, codes.Unavailable, "explicit model load / unload is not allowed if polling is enabled")
}

func TestSharedMemoryDisabled(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c := ctx(t)
	st, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{})
	if err != nil || len(st.Regions) != 0 {
		t.Fatal(st, err)
	}
	_, err = h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: "nope"})
	wantStatus(t, err, codes.NotFound, "Unable to find system shared memory region: 'nope'")
	_, err = h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "r", Key: "k"})
	wantStatus(t, err, codes.Unimplemented, "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.")
	_, err = h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "r"})
	wantStatus(t, err, codes.InvalidArgument, "failed to register CUDA shared memory region: 'r', GPUs not supported")
}

func TestModelInfer(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c := ctx(t)
	for _, raw := range []bool{true, false} {
		resp, err := h.client.ModelInfer(c, simpleRequest(raw))
		if err != nil {
			t.Fatalf("raw=%v: %v", raw, err)
		}
		checkSimple(t, resp)
	}
	st, err := h.client.ModelStatistics(c, &pb.ModelStatisticsRequest{})
	if err != nil || len(st.ModelStats) != 1 || st.ModelStats[0].InferenceStats.Success.Count < 2 || st.ModelStats[0].InferenceStats.CacheHit == nil {
		t.Fatal(st, err)
	}

	// Surplus raw entries are ignored.
	req := simpleRequest(true)
	req.RawInputContents = append(req.RawInputContents, []byte{1})
	if _, err := h.client.ModelInfer(c, req); err != nil {
		t.Fatal(err)
	}
	// Classification of OUTPUT0, top 2.
	req = simpleRequest(true)
	req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: map[string]*pb.InferParameter{
		"classification": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 2}},
	}}}
	resp, err := h.client.ModelInfer(c, req)
	if err != nil || len(resp.Outputs) != 1 || resp.Outputs[0].Datatype != "BYTES" || len(resp.Outputs[0].Shape) != 2 || resp.Outputs[0].Shape[1] != 2 {
		t.Fatal(resp, err)
	}
	if got := string(resp.RawOutputContents[0]); got != "\x05\x00\x00\x0016:15\x05\x00\x00\x0015:14" {
		t.Fatalf("classification %q", got)
	}
}

func TestModelInferErrors(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c := ctx(t)
	cases := []struct {
		name string
		edit func(*pb.ModelInferRequest)
		code codes.Code
		msg  string
	}{
		{"unknown model", func(r *pb.ModelInferRequest) { r.ModelName = "nope" }, codes.NotFound, "Request for unknown model: 'nope' is not found"},
		{"bad version", func(r *pb.ModelInferRequest) { r.ModelVersion = "x" }, codes.InvalidArgument,
			"failed to get model version from specified version string 'x' (details: stol), version should be an integral value > 0"},
		{"mixed contents", func(r *pb.ModelInferRequest) {
			r.Inputs[0].Contents = &pb.InferTensorContents{IntContents: make([]int32, 16)}
			r.RawInputContents = r.RawInputContents[1:]
		}, codes.InvalidArgument, "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'"},
		{"missing data", func(r *pb.ModelInferRequest) { r.RawInputContents = r.RawInputContents[:1] }, codes.InvalidArgument,
			"unable to find data for input tensor 'INPUT1' for model 'simple' in request."},
		{"byte size", func(r *pb.ModelInferRequest) { r.RawInputContents[0] = r.RawInputContents[0][:60] }, codes.InvalidArgument,
			"[request id: 7] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"},
		{"duplicate output", func(r *pb.ModelInferRequest) {
			r.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0"}, {Name: "OUTPUT0"}}
		}, codes.InvalidArgument, "output 'OUTPUT0' already exists in request"},
		{"reserved parameter", func(r *pb.ModelInferRequest) {
			r.Parameters = map[string]*pb.InferParameter{"triton_foo": {ParameterChoice: &pb.InferParameter_BoolParam{}}}
		}, codes.InvalidArgument, "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response"},
		{"negative priority", func(r *pb.ModelInferRequest) {
			r.Parameters = map[string]*pb.InferParameter{"priority": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: -1}}}
		}, codes.InvalidArgument, "invalid value for 'priority', expected value >= 0."},
		{"classification zero", func(r *pb.ModelInferRequest) {
			r.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: map[string]*pb.InferParameter{
				"classification": {ParameterChoice: &pb.InferParameter_Int64Param{}}}}}
		}, codes.InvalidArgument, "invalid value for 'classification' parameter, expected >= 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := simpleRequest(true)
			tc.edit(req)
			_, err := h.client.ModelInfer(c, req)
			wantStatus(t, err, tc.code, tc.msg)
		})
	}
	t.Run("typed datatype", func(t *testing.T) {
		req := simpleRequest(false)
		req.Inputs[0].Contents = &pb.InferTensorContents{Fp32Contents: make([]float32, 16)}
		_, err := h.client.ModelInfer(c, req)
		wantStatus(t, err, codes.InvalidArgument, "unexpected explicit tensor data for input tensor 'INPUT0' for model 'simple' of type 'FP32', expected datatype 'INT32'")
	})
}

func TestModelInferCancelled(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.client.ModelInfer(c, simpleRequest(true))
	if status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	c, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	_, err = h.client.ModelInfer(c, simpleRequest(true))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("expired call: %v", err)
	}
	// The server still serves.
	if _, err := h.client.ModelInfer(ctx(t), simpleRequest(true)); err != nil {
		t.Fatal(err)
	}
}

func TestRestrictedProtocol(t *testing.T) {
	h := start(t, servertest.Options{}, Options{Restricted: map[string]Restriction{
		"inference": {Key: "Infer-Key", Value: "v"},
		"health":    {Key: "k", Value: "v"},
	}})
	c := ctx(t)
	_, err := h.client.ModelInfer(c, simpleRequest(true))
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'")
	_, err = h.client.ModelInfer(metadata.AppendToOutgoingContext(c, "triton-grpc-protocol-infer-key", "V"), simpleRequest(true))
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'")
	if _, err := h.client.ModelInfer(metadata.AppendToOutgoingContext(c, "triton-grpc-protocol-infer-key", "v"), simpleRequest(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.ModelStatistics(c, &pb.ModelStatisticsRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = h.health.Check(c, &healthpb.HealthCheckRequest{})
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-k'")
}

func TestRepositoryExplicit(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{"simple": simpleModel()})
	h := start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit}, Options{})
	c := ctx(t)
	idx, err := h.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{})
	if err != nil || len(idx.Models) != 1 || idx.Models[0].Name != "simple" || idx.Models[0].State != "" {
		t.Fatal(idx, err)
	}
	_, err = h.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "simple", Parameters: map[string]*pb.ModelRepositoryParameter{
		"foo": {ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: "x"}}}})
	wantStatus(t, err, codes.InvalidArgument, "unrecognized load parameter 'foo'.")
	if _, err := h.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "simple"}); err != nil {
		t.Fatal(err)
	}
	idx, err = h.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{Ready: true})
	if err != nil || len(idx.Models) != 1 || idx.Models[0].State != "READY" || idx.Models[0].Version != "1" {
		t.Fatal(idx, err)
	}
	if _, err := h.client.ModelInfer(c, simpleRequest(true)); err != nil {
		t.Fatal(err)
	}
	// A new model from a config and raw file bytes.
	_, err = h.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "added", Parameters: map[string]*pb.ModelRepositoryParameter{
		"config":            {ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: `{"backend":"onnxruntime","max_batch_size":8}`}},
		"file:1/model.onnx": {ParameterChoice: &pb.ModelRepositoryParameter_BytesParam{BytesParam: simpleModel().ONNX}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.RepositoryModelUnload(c, &pb.RepositoryModelUnloadRequest{ModelName: "simple", Parameters: map[string]*pb.ModelRepositoryParameter{
		"unload_dependents": {ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: "true"}}}})
	wantStatus(t, err, codes.InvalidArgument, "invalid value type for 'unload_dependents' parameter, expected bool_param.")
	if mr, err := h.client.ModelReady(c, &pb.ModelReadyRequest{Name: "simple"}); err != nil || !mr.Ready {
		t.Fatal("simple unloaded after a refused unload", err)
	}
	if _, err := h.client.RepositoryModelUnload(c, &pb.RepositoryModelUnloadRequest{ModelName: "simple"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.RepositoryModelUnload(c, &pb.RepositoryModelUnloadRequest{ModelName: "never"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.ModelInfer(c, simpleRequest(true))
	if status.Code(err) == codes.OK {
		t.Fatal("inference on an unloaded model")
	}
}
