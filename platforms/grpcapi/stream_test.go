package grpcapi

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// mismatchConfig declares variable-length inputs, so two inputs of
// different lengths pass the core's validation and fail in ONNX Runtime
// (an asynchronous error, delivered in a response).
const mismatchConfig = `name: "mismatch"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

func startStreamRepo(t *testing.T) *harness {
	repo := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple":   simpleModel(),
		"mismatch": {Config: mismatchConfig, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, -1))},
	})
	return start(t, servertest.Options{Repo: repo}, Options{})
}

func mismatchRequest(id string) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "mismatch", Id: id, Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 3}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 4}},
	}, RawInputContents: [][]byte{int32s([]int32{1, 2, 3}), int32s([]int32{1, 2, 3, 4})}}
}

func simpleWithID(id string) *pb.ModelInferRequest {
	r := simpleRequest(true)
	r.Id = id
	return r
}

func checkFinal(t *testing.T, r *pb.ModelInferResponse) {
	t.Helper()
	if p := r.GetParameters()["triton_final_response"]; p == nil || !p.GetBoolParam() {
		t.Fatalf("triton_final_response = %v", p)
	}
}

// TestModelStreamInferOrder sends good and bad requests on one stream:
// every response comes back in request order, including a synchronous
// error that is ready long before the inference ahead of it, the stream
// stays open after errors, ids come back, and half-closing ends the
// stream with OK after the last response.
func TestModelStreamInferOrder(t *testing.T) {
	h := startStreamRepo(t)
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	bad := simpleWithID("bad")
	bad.Inputs[0].Shape = []int64{1, 15}
	unknown := simpleWithID("unknown")
	unknown.ModelName = "nope"
	reqs := []*pb.ModelInferRequest{simpleWithID("a"), bad, simpleWithID("b"), unknown, mismatchRequest("async"), simpleWithID("c")}
	for _, r := range reqs {
		servertest.Must(t, st.Send(r))
	}
	servertest.Must(t, st.CloseSend())
	for _, r := range reqs {
		resp, err := st.Recv()
		servertest.Must(t, err)
		ir := resp.GetInferResponse()
		if ir.GetId() != r.Id {
			t.Fatalf("response for %q, want %q", ir.GetId(), r.Id)
		}
		switch r.Id {
		case "bad":
			if !strings.Contains(resp.ErrorMessage, "unexpected shape for input 'INPUT0'") || ir.ModelName != "" || ir.Parameters != nil {
				t.Fatalf("sync error %q %v", resp.ErrorMessage, ir)
			}
		case "unknown":
			if resp.ErrorMessage == "" || ir.ModelName != "" {
				t.Fatalf("unknown model: %q %v", resp.ErrorMessage, ir)
			}
		case "async":
			if resp.ErrorMessage == "" || ir.ModelName != "mismatch" || ir.ModelVersion != "" || len(ir.Outputs) != 0 {
				t.Fatalf("async error %q %v", resp.ErrorMessage, ir)
			}
			checkFinal(t, ir)
		default:
			if resp.ErrorMessage != "" {
				t.Fatalf("%s: %s", r.Id, resp.ErrorMessage)
			}
			ir.Id = "7"
			checkSimple(t, ir)
			checkFinal(t, ir)
		}
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: %v", err)
	}
}

// TestModelStreamInferGRPCErrorMode checks triton_grpc_error: synchronous
// errors stay in-band, the first asynchronous one ends the stream with
// its status.
func TestModelStreamInferGRPCErrorMode(t *testing.T) {
	h := startStreamRepo(t)
	st, err := h.client.ModelStreamInfer(metadata.AppendToOutgoingContext(ctx(t), "triton_grpc_error", "true"))
	servertest.Must(t, err)
	bad := simpleWithID("bad")
	bad.ModelVersion = "x"
	servertest.Must(t, st.Send(bad))
	resp, err := st.Recv()
	servertest.Must(t, err)
	if resp.ErrorMessage == "" || resp.GetInferResponse().GetId() != "bad" {
		t.Fatalf("sync error in mode: %v", resp)
	}
	servertest.Must(t, st.Send(simpleWithID("a")))
	resp, err = st.Recv()
	servertest.Must(t, err)
	if resp.ErrorMessage != "" {
		t.Fatal(resp.ErrorMessage)
	}
	servertest.Must(t, st.Send(mismatchRequest("async")))
	_, err = st.Recv()
	if s, _ := status.FromError(err); s.Code() == codes.OK || s.Code() == codes.Canceled || s.Message() == "" {
		t.Fatalf("stream end: %v", err)
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream still open")
	}
}

// TestModelStreamInferDraining answers a request read during draining
// in-band, with the id only.
func TestModelStreamInferDraining(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	h.api.SetExiting()
	servertest.Must(t, st.Send(simpleWithID("d")))
	resp, err := st.Recv()
	servertest.Must(t, err)
	if resp.ErrorMessage != streamDraining || resp.GetInferResponse().GetId() != "d" || resp.GetInferResponse().GetModelName() != "" {
		t.Fatalf("draining: %v", resp)
	}
	servertest.Must(t, st.CloseSend())
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

// TestModelStreamInferRestricted refuses the stream at open.
func TestModelStreamInferRestricted(t *testing.T) {
	h := start(t, servertest.Options{}, Options{Restricted: map[string]Restriction{"inference": {Key: "k", Value: "v"}}})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	_, err = st.Recv()
	wantStatus(t, err, codes.Unavailable, "This protocol is restricted, expecting header 'triton-grpc-protocol-k'")
}

// TestModelStreamInferCancel cancels a stream with requests in flight:
// the client sees CANCELLED and the server keeps serving.
func TestModelStreamInferCancel(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c, cancel := context.WithCancel(ctx(t))
	st, err := h.client.ModelStreamInfer(c)
	servertest.Must(t, err)
	for i := 0; i < 8; i++ {
		servertest.Must(t, st.Send(simpleWithID("x")))
	}
	cancel()
	// Responses that arrived before the cancellation may still be read.
	for i := 0; ; i++ {
		_, err := st.Recv()
		if err == nil && i < 8 {
			continue
		}
		if status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled stream: %v", err)
		}
		break
	}
	resp, err := h.client.ModelInfer(ctx(t), simpleRequest(true))
	servertest.Must(t, err)
	checkSimple(t, resp)
}

// fakeStream feeds ModelStreamInfer its requests and records its
// responses, without a transport.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	in   []*pb.ModelInferRequest
	sent []*pb.ModelStreamInferResponse
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*pb.ModelInferRequest, error) {
	if len(f.in) == 0 {
		return nil, io.EOF
	}
	r := f.in[0]
	f.in = f.in[1:]
	return r, nil
}

func (f *fakeStream) Send(r *pb.ModelStreamInferResponse) error {
	f.sent = append(f.sent, r)
	return nil
}

// FuzzModelStreamInfer runs an arbitrary request between two good ones
// through the stream handler, with and without triton_grpc_error: the
// handler must not panic, must answer every request once and in order
// (or, in triton_grpc_error mode, end the stream with a classified status
// at the fuzzed request), and the good requests must succeed.
func FuzzModelStreamInfer(f *testing.F) {
	repo := servertest.WriteRepo(f, map[string]servertest.Model{
		"simple":   simpleModel(),
		"mismatch": {Config: mismatchConfig, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, -1))},
	})
	api := New(servertest.Start(f, servertest.Options{Repo: repo}), Options{})
	bad := simpleWithID("bad")
	bad.Inputs[0].Shape = []int64{1, 15}
	for _, r := range []*pb.ModelInferRequest{simpleRequest(true), simpleRequest(false), bad, mismatchRequest("m"), {}} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, errMode bool) {
		var in pb.ModelInferRequest
		if proto.Unmarshal(data, &in) != nil {
			return
		}
		in.Id = "fuzz"
		c := context.Background()
		if errMode {
			c = metadata.NewIncomingContext(c, metadata.Pairs("triton_grpc_error", "true"))
		}
		st := &fakeStream{ctx: c, in: []*pb.ModelInferRequest{simpleWithID("a"), &in, simpleWithID("b")}}
		err := api.ModelStreamInfer(st)
		want := []string{"a", "fuzz", "b"}
		if err != nil {
			if s, ok := status.FromError(err); !errMode || !ok || s.Code() == codes.OK || s.Message() == "" {
				t.Fatalf("stream ended with %v", err)
			}
			want = want[:1]
		}
		if len(st.sent) != len(want) {
			t.Fatalf("%d responses, want %d", len(st.sent), len(want))
		}
		for i, r := range st.sent {
			if r.GetInferResponse().GetId() != want[i] {
				t.Fatalf("response %d for %q, want %q", i, r.GetInferResponse().GetId(), want[i])
			}
			if want[i] != "fuzz" && r.ErrorMessage != "" {
				t.Fatalf("%s: %s", want[i], r.ErrorMessage)
			}
		}
	})
}

// TestModelStreamInferDecoupled streams a decoupled model's 0, 1 and
// 1,000 responses, written as they come with their values in order,
// beside a non-decoupled request on the same stream; the stream ends
// cleanly once every request has finished.
func TestModelStreamInferDecoupled(t *testing.T) {
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	counts := map[string]int{"r0": 0, "r1": 1, "r1000": 1000}
	for id, n := range counts {
		req := repeatRequest(id, n)
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(7 * i)
		}
		req.RawInputContents = [][]byte{int32s(vals)}
		servertest.Must(t, st.Send(req))
	}
	servertest.Must(t, st.Send(simpleWithID("7")))
	servertest.Must(t, st.CloseSend())
	got := map[string]int{}
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		servertest.Must(t, err)
		ir := resp.GetInferResponse()
		if resp.GetErrorMessage() != "" {
			t.Fatal(resp.GetErrorMessage())
		}
		if ir.GetModelName() == "simple" {
			checkSimple(t, ir)
			continue
		}
		i := got[ir.GetId()]
		for k, o := range ir.GetOutputs() {
			want := int32(7 * i)
			if o.GetName() == "IDX" {
				want = int32(i)
			}
			if v := decodeInt32s(ir.GetRawOutputContents()[k])[0]; v != want {
				t.Fatalf("%s response %d: %s = %d, want %d", ir.GetId(), i, o.GetName(), v, want)
			}
		}
		got[ir.GetId()]++
	}
	for id, n := range counts {
		if got[id] != n {
			t.Fatalf("%s: %d responses, want %d", id, got[id], n)
		}
	}
}

// TestModelStreamInferDecoupledCancel cancels a stream in the middle of a
// decoupled model's responses: the client sees CANCELLED, the model stops
// producing, and the server serves the next stream.
func TestModelStreamInferDecoupledCancel(t *testing.T) {
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{})
	c, cancel := context.WithCancel(ctx(t))
	st, err := h.client.ModelStreamInfer(c)
	servertest.Must(t, err)
	req := repeatRequest("long", 100000)
	req.Parameters = map[string]*pb.InferParameter{"wait_us": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 100}}}
	servertest.Must(t, st.Send(req))
	for range 10 {
		_, err := st.Recv()
		servertest.Must(t, err)
	}
	cancel()
	for {
		if _, err := st.Recv(); err != nil {
			if status.Code(err) != codes.Canceled {
				t.Fatalf("cancelled stream: %v", err)
			}
			break
		}
	}
	servertest.WaitCancelled(t, h.core, "repeat", 10*time.Second)
	st, err = h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	servertest.Must(t, st.Send(repeatRequest("next", 2)))
	for range 2 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestModelStreamInferEmptyFinalResponse sends a decoupled request with
// triton_enable_empty_final_response true, false, absent and of the wrong
// type on one stream: only true adds the empty final message, and the
// wrong type is answered in-band with the protocol's INVALID_ARG text.
func TestModelStreamInferEmptyFinalResponse(t *testing.T) {
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	with := func(id string, p *pb.InferParameter) *pb.ModelInferRequest {
		req := repeatRequest(id, 2)
		if p != nil {
			req.Parameters = map[string]*pb.InferParameter{"triton_enable_empty_final_response": p}
		}
		return req
	}
	servertest.Must(t, st.Send(with("on", &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}})))
	servertest.Must(t, st.Send(with("off", &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: false}})))
	servertest.Must(t, st.Send(with("absent", nil)))
	servertest.Must(t, st.Send(with("bad", &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}})))
	servertest.Must(t, st.CloseSend())
	msgs := map[string][]*pb.ModelStreamInferResponse{}
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		servertest.Must(t, err)
		id := resp.GetInferResponse().GetId()
		msgs[id] = append(msgs[id], resp)
	}
	for _, id := range []string{"on", "off", "absent"} {
		want := 2
		if id == "on" {
			want = 3
		}
		if len(msgs[id]) != want {
			t.Fatalf("%s: %d messages, want %d", id, len(msgs[id]), want)
		}
		for i, m := range msgs[id] {
			ir := m.GetInferResponse()
			final := ir.GetParameters()["triton_final_response"].GetBoolParam()
			empty := i == 2
			if m.GetErrorMessage() != "" || final != empty || (len(ir.GetOutputs()) == 0) != empty {
				t.Fatalf("%s message %d: %v", id, i, m)
			}
		}
	}
	bad := msgs["bad"]
	if len(bad) != 1 || bad[0].GetErrorMessage() != "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param." {
		t.Fatalf("bad: %v", bad)
	}
}
