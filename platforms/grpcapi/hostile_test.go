package grpcapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
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
