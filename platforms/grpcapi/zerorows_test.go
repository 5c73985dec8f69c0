package grpcapi

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// zeroIdentityPy is a model.py that answers OUTPUT0 = INPUT0.
const zeroIdentityPy = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
`

// writeZeroRowRepo writes FP32 identities of each kind: ONNX, Python and
// an ensemble of the two (Python, then ONNX), batching with dims [4]
// (suffix _b) and not batching with dims [-1, -1] (suffix _nb).
func writeZeroRowRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	config := func(maxBatch int, dims, kind string) string {
		return fmt.Sprintf("max_batch_size: %d\n%s\n"+
			"input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: %s } ]\n"+
			"output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: %s } ]\n", maxBatch, kind, dims, dims)
	}
	for _, m := range []struct {
		suffix, dims string
		maxBatch     int
		onnx         []byte
	}{
		{"_b", "[ 4 ]", 4, onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4))},
		{"_nb", "[ -1, -1 ]", 0, onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))},
	} {
		servertest.WriteModel(t, filepath.Join(root, "onnx"+m.suffix), servertest.Model{Config: config(m.maxBatch, m.dims, `platform: "onnxruntime_onnx"`), ONNX: m.onnx})
		servertest.WriteModel(t, filepath.Join(root, "py"+m.suffix), servertest.Model{Config: config(m.maxBatch, m.dims, `backend: "python"`)})
		servertest.Must(t, os.WriteFile(filepath.Join(root, "py"+m.suffix, "1", "model.py"), []byte(zeroIdentityPy), 0o644))
		servertest.WriteModel(t, filepath.Join(root, "ens"+m.suffix), servertest.Ensemble(servertest.EnsembleConfig("ens"+m.suffix, m.maxBatch,
			[]string{"INPUT0:TYPE_FP32:" + m.dims}, []string{"OUTPUT0:TYPE_FP32:" + m.dims},
			servertest.Step{Model: "py" + m.suffix, In: []string{"INPUT0=INPUT0"}, Out: []string{"OUTPUT0=mid"}},
			servertest.Step{Model: "onnx" + m.suffix, In: []string{"INPUT0=mid"}, Out: []string{"OUTPUT0=OUTPUT0"}})))
	}
	return root
}

// TestZeroRows: a batch of 0 rows ([0, 4] to a model with max_batch_size
// 4 and dims [4]) is refused with INVALID_ARGUMENT by ONNX, Python and
// ensemble models alike, as Triton refuses it: Triton takes a batch of 0
// as no batch dimension and sizes the input by dims alone
// (triton-inference-server/core src/infer_request.cc), so it expects 16
// bytes and got 0. A tensor of no elements that is valid (shape [0, 4]
// for a non-batching model with dims [-1, -1]) reaches each kind of model
// and comes back empty with its shape. Both ways, raw_input_contents and
// typed contents, and the models answer the next request.
func TestZeroRows(t *testing.T) {
	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	h := start(t, servertest.Options{Repo: writeZeroRowRepo(t), Backends: []core.Backend{py}}, Options{})

	infer := func(t *testing.T, model string, shape []int64, raw bool) (*pb.ModelInferResponse, error) {
		t.Helper()
		n := core.ElementCount(shape)
		in := &pb.ModelInferRequest_InferInputTensor{Name: "INPUT0", Datatype: "FP32", Shape: shape}
		req := &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{in}}
		if raw {
			req.RawInputContents = [][]byte{make([]byte, 4*n)}
		} else {
			in.Contents = &pb.InferTensorContents{Fp32Contents: make([]float32, n)}
		}
		return h.client.ModelInfer(ctx(t), req)
	}
	for _, kind := range []string{"onnx", "py", "ens"} {
		for _, raw := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s raw=%v", kind, raw), func(t *testing.T) {
				batching := kind + "_b"
				_, err := infer(t, batching, []int64{0, 4}, raw)
				want := "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model '" + batching + "'. Expected 16, got 0"
				if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != want {
					t.Errorf("%s [0,4]: %v %q, want INVALID_ARGUMENT %q", batching, st.Code(), st.Message(), want)
				}

				plain := kind + "_nb"
				resp, err := infer(t, plain, []int64{0, 4}, raw)
				if err != nil || len(resp.GetOutputs()) != 1 || !slices.Equal(resp.GetOutputs()[0].GetShape(), []int64{0, 4}) ||
					len(resp.GetRawOutputContents()) != 1 || len(resp.GetRawOutputContents()[0]) != 0 {
					t.Errorf("%s [0,4]: %v %v, want an empty OUTPUT0 of shape [0,4]", plain, resp, err)
				}

				// The models still serve a request with rows.
				for _, model := range []string{batching, plain} {
					resp, err := infer(t, model, []int64{2, 4}, raw)
					if err != nil || len(resp.GetRawOutputContents()) != 1 || len(resp.GetRawOutputContents()[0]) != 32 {
						t.Errorf("%s [2,4] after the empty requests: %v %v", model, resp, err)
					}
				}
			})
		}
	}
	if t.Failed() {
		return
	}
	for _, m := range []string{"onnx_b", "py_b", "ens_b", "onnx_nb", "py_nb", "ens_nb"} {
		if r, err := h.client.ModelReady(ctx(t), &pb.ModelReadyRequest{Name: m}); err != nil || !r.GetReady() {
			t.Errorf("%s not ready at the end: %v %v", m, r, err)
		}
	}
}
