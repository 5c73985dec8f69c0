package grpcapi

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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

// TestSharedMemoryInput: with client shared memory off no region can be
// registered, so a tensor naming one is refused as an unknown region.
func TestSharedMemoryInput(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	req := simpleRequest(true)
	req.Inputs[0].Parameters = map[string]*pb.InferParameter{
		"shared_memory_region":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}},
		"shared_memory_byte_size": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 64}}}
	req.RawInputContents = req.RawInputContents[1:]
	_, err := h.client.ModelInfer(ctx(t), req)
	wantStatus(t, err, codes.NotFound, "Unable to find shared memory region: 'r'")
}

// TestResponseSizeLimit: a response past INT32_MAX bytes is refused with
// Triton's text (triton-inference-server/server
// src/grpc/infer_handler.h). The buffer is never touched, so the
// kernel lends its pages lazily.
func TestResponseSizeLimit(t *testing.T) {
	out := &pb.ModelInferResponse{ModelName: "m", RawOutputContents: [][]byte{make([]byte, math.MaxInt32)}}
	want := fmt.Sprintf("Response has byte size %d which exceeds gRPC's byte size limit 2147483647.", proto.Size(out))
	if err := checkResponseSize(out); core.CodeOf(err) != core.CodeInvalidArg || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if err := checkResponseSize(&pb.ModelInferResponse{RawOutputContents: [][]byte{make([]byte, 1<<20)}}); err != nil {
		t.Fatal(err)
	}
}
