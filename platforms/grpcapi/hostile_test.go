package grpcapi

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/fuzzshape"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestHostileShapeKeepsPythonModel: a ModelInfer whose shape times the
// element size overflows int64 while raw_input_contents is empty is
// refused with INVALID_ARGUMENT before it reaches the model, and the Python
// model stays ready and answers the next request.
func TestHostileShapeKeepsPythonModel(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pyid")
	servertest.Must(t, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(`name: "pyid"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
`), 0o644))
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "1", "model.py"), []byte(`import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
`), 0o644))
	b := python.New(python.Options{Executable: servertest.Python(t), ArenaBytes: python.DefaultArenaBytes})
	t.Cleanup(func() { _ = b.Close() })
	h := start(t, servertest.Options{Repo: root, Backends: []core.Backend{b}}, Options{})

	cases := []struct {
		name  string
		shape []int64
		raw   []byte
		want  string
	}{
		{"elements times 4 wraps to 0", []int64{4611686018427387904}, []byte{}, "byte size overflow for input 'IN'"},
		{"elements times 4 wraps to 4", []int64{4611686018427387905}, make([]byte, 4), "byte size overflow for input 'IN'"},
		{"2^61 elements of 4 bytes", []int64{1 << 61}, nil, "byte size overflow for input 'IN'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.client.ModelInfer(ctx(t), &pb.ModelInferRequest{ModelName: "pyid",
				Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "FP32", Shape: c.shape}},
				RawInputContents: [][]byte{c.raw}})
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) {
				t.Fatalf("got %v %q, want INVALID_ARGUMENT with %q", st.Code(), st.Message(), c.want)
			}
		})
	}
	ready, err := h.client.ModelReady(ctx(t), &pb.ModelReadyRequest{Name: "pyid"})
	servertest.Must(t, err)
	if !ready.GetReady() {
		t.Fatal("the model is not ready after the refused requests")
	}
	server, err := h.client.ServerReady(ctx(t), &pb.ServerReadyRequest{})
	servertest.Must(t, err)
	if !server.GetReady() {
		t.Fatal("the server is not ready after the refused requests")
	}
	resp, err := h.client.ModelInfer(ctx(t), &pb.ModelInferRequest{ModelName: "pyid",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "FP32", Shape: []int64{2}}},
		RawInputContents: [][]byte{make([]byte, 8)}})
	servertest.Must(t, err)
	if len(resp.GetRawOutputContents()) != 1 || len(resp.GetRawOutputContents()[0]) != 8 {
		t.Fatalf("the next request: %v", resp)
	}
}

// FuzzModelInferIntoCore sends what a gRPC client may put in one input
// (any datatype name, shape and raw bytes) through ModelInfer's conversion
// into a running core, to identity models of every datatype with a
// variable dim (one core for the whole run, no process per execution).
// Nothing panics; what the core accepts has exactly the bytes its shape
// needs, computed without wrapping, and comes back unchanged.
func FuzzModelInferIntoCore(f *testing.F) {
	f.Add("FP32", fuzzshape.Bytes(1<<62), []byte{}, true)
	f.Add("FP32", fuzzshape.Bytes(1<<62+1), make([]byte, 4), true)
	f.Add("FP64", fuzzshape.Bytes(1<<61), []byte{}, true)
	f.Add("FP32", fuzzshape.Bytes(2), make([]byte, 8), true)
	f.Add("BYTES", fuzzshape.Bytes(1<<62), []byte{}, true)
	f.Add("BYTES", fuzzshape.Bytes(2), []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0}, true)
	f.Add("BF16", fuzzshape.Bytes(3), make([]byte, 6), true)
	f.Add("INT8", fuzzshape.Bytes(-1), []byte{}, false)
	f.Add("FP32", fuzzshape.Bytes(math.MaxInt64), []byte{}, false)
	root := f.TempDir()
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		servertest.WriteModel(f, filepath.Join(root, "id_"+dt.String()), servertest.Model{Config: fmt.Sprintf(`backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: %s dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: %s dims: [ -1 ] } ]
`, dt.ConfigName(), dt.ConfigName())})
	}
	srv := servertest.Start(f, servertest.Options{Repo: root})
	f.Fuzz(func(t *testing.T, datatype string, dims []byte, raw []byte, useRaw bool) {
		in := &pb.ModelInferRequest{ModelName: "id_FP32", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: datatype, Shape: fuzzshape.Shape(dims)}}}
		if dt := core.ParseDataType(datatype); dt != core.TypeInvalid {
			in.ModelName = "id_" + dt.String()
		}
		if useRaw {
			in.RawInputContents = [][]byte{raw}
		}
		req, _, _, err := inferRequest(in, nil, nil)
		if err != nil {
			return
		}
		resp, err := srv.Infer(context.Background(), req)
		if err := servertest.CheckIdentityAnswer(req.Inputs[0], resp, err); err != nil {
			t.Fatal(err)
		}
	})
}
