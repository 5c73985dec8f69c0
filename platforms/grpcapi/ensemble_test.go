package grpcapi

import (
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestEnsembleOverGRPC runs a two-step ensemble of `simple` through
// ModelInfer and ModelStreamInfer on a real listener, and reads its
// metadata's platform.
func TestEnsembleOverGRPC(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": simpleModel(),
		"chain": servertest.Ensemble(servertest.EnsembleConfig("chain", 8,
			[]string{"INPUT0:TYPE_INT32:[ 16 ]", "INPUT1:TYPE_INT32:[ 16 ]"}, []string{"OUTPUT0:TYPE_INT32:[ 16 ]", "OUTPUT1:TYPE_INT32:[ 16 ]"},
			// One step whose outputs are the ensemble's, so checkSimple applies.
			servertest.Step{Model: "simple", In: []string{"INPUT0=INPUT0", "INPUT1=INPUT1"}, Out: []string{"OUTPUT0=OUTPUT0", "OUTPUT1=OUTPUT1"}})),
		"id_bytes": servertest.IDBytes("id_bytes"),
		// fan-out over BYTES: two identity steps read TEXT at once.
		"bytes_fan": servertest.Ensemble(servertest.EnsembleConfig("bytes_fan", 0, []string{"TEXT:TYPE_STRING:[ -1 ]"}, []string{"A:TYPE_STRING:[ -1 ]", "B:TYPE_STRING:[ -1 ]"},
			servertest.Step{Model: "id_bytes", In: []string{"INPUT0=TEXT"}, Out: []string{"OUTPUT0=A"}},
			servertest.Step{Model: "id_bytes", In: []string{"INPUT0=TEXT"}, Out: []string{"OUTPUT0=B"}})),
	})
	h := start(t, servertest.Options{Repo: root}, Options{})
	c := ctx(t)
	req := simpleRequest(true)
	req.ModelName = "chain"
	resp, err := h.client.ModelInfer(c, req)
	servertest.Must(t, err)
	resp.ModelName = "simple"
	checkSimple(t, resp)
	st, err := h.client.ModelStreamInfer(c)
	servertest.Must(t, err)
	servertest.Must(t, st.Send(req))
	sr, err := st.Recv()
	servertest.Must(t, err)
	if sr.GetErrorMessage() != "" {
		t.Fatal(sr.GetErrorMessage())
	}
	sr.InferResponse.ModelName = "simple"
	checkSimple(t, sr.GetInferResponse())
	text := &pb.ModelInferRequest{ModelName: "bytes_fan", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "TEXT", Datatype: "BYTES", Shape: []int64{2},
		Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), []byte("bcd")}}}}}
	br, err := h.client.ModelInfer(c, text)
	servertest.Must(t, err)
	const want = "\x01\x00\x00\x00a\x03\x00\x00\x00bcd"
	if len(br.GetRawOutputContents()) != 2 || string(br.GetRawOutputContents()[0]) != want || string(br.GetRawOutputContents()[1]) != want {
		t.Fatalf("BYTES fan-out: %q", br.GetRawOutputContents())
	}
	md, err := h.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "chain"})
	if err != nil || md.GetPlatform() != "ensemble" {
		t.Fatal(md, err)
	}
}

// TestDecoupledEnsembleStream streams a decoupled ensemble (servertest's
// Repeat, then an ONNX identity) over ModelStreamInfer: one message per
// response, not final, and nothing for the final flag alone.
func TestDecoupledEnsembleStream(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
		"id_int": {Config: `name: "id_int"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Int32, 1))},
		"stream": servertest.Ensemble(servertest.EnsembleConfig("stream", 0, []string{"IN:TYPE_INT32:[ -1 ]"}, []string{"Y:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=r"}},
			servertest.Step{Model: "id_int", In: []string{"INPUT0=r"}, Out: []string{"OUTPUT0=Y"}})),
	})
	h := start(t, servertest.Options{Repo: root}, Options{})
	st, err := h.client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	req := repeatRequest("s", 3)
	req.ModelName = "stream"
	req.RawInputContents = [][]byte{int32s([]int32{7, 8, 9})}
	servertest.Must(t, st.Send(req))
	servertest.Must(t, st.CloseSend())
	var got []int32
	for {
		resp, err := st.Recv()
		if err == io.EOF {
			break
		}
		servertest.Must(t, err)
		ir := resp.GetInferResponse()
		if resp.GetErrorMessage() != "" || ir.GetParameters()["triton_final_response"].GetBoolParam() {
			t.Fatalf("message %v", resp)
		}
		got = append(got, decodeInt32s(ir.GetRawOutputContents()[0])...)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{7, 8, 9}) {
		t.Fatalf("streamed %v", got)
	}
	// ModelInfer refuses it: the ensemble is decoupled.
	_, err = h.client.ModelInfer(ctx(t), req)
	wantStatus(t, err, codes.Unimplemented, "ModelInfer RPC doesn't support models with decoupled transaction policy")
}
