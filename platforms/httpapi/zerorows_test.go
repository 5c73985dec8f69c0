package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// zeroIdentityPy is a model.py that answers OUTPUT0 = INPUT0.
const zeroIdentityPy = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
`

// zeroRowModels are FP32 identities of each kind: ONNX, Python and an
// ensemble of the two (Python, then ONNX), batching with dims [4]
// (suffix _b) and not batching with dims [-1, -1] (suffix _nb).
func zeroRowModels(t *testing.T) map[string]testModel {
	t.Helper()
	config := func(maxBatch int, dims, kind string) string {
		return fmt.Sprintf("max_batch_size: %d\n%s\n"+
			"input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: %s } ]\n"+
			"output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: %s } ]\n", maxBatch, kind, dims, dims)
	}
	ensemble := func(name string, maxBatch int, dims string) testModel {
		return testModel{config: servertest.EnsembleConfig(name, maxBatch,
			[]string{"INPUT0:TYPE_FP32:" + dims}, []string{"OUTPUT0:TYPE_FP32:" + dims},
			servertest.Step{Model: strings.Replace(name, "ens", "py", 1), In: []string{"INPUT0=INPUT0"}, Out: []string{"OUTPUT0=mid"}},
			servertest.Step{Model: strings.Replace(name, "ens", "onnx", 1), In: []string{"INPUT0=mid"}, Out: []string{"OUTPUT0=OUTPUT0"}}),
			files: map[string]string{"1/.keep": ""}}
	}
	py := map[string]string{"1/model.py": zeroIdentityPy}
	return map[string]testModel{
		"onnx_b":  {config: config(4, "[ 4 ]", `platform: "onnxruntime_onnx"`), onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4))},
		"py_b":    {config: config(4, "[ 4 ]", `backend: "python"`), files: py},
		"ens_b":   ensemble("ens_b", 4, "[ 4 ]"),
		"onnx_nb": {config: config(0, "[ -1, -1 ]", `platform: "onnxruntime_onnx"`), onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))},
		"py_nb":   {config: config(0, "[ -1, -1 ]", `backend: "python"`), files: py},
		"ens_nb":  ensemble("ens_nb", 0, "[ -1, -1 ]"),
	}
}

// TestZeroRows: a batch of 0 rows ([0, 4] to a model with max_batch_size
// 4 and dims [4]) is refused with 400 by ONNX, Python and ensemble models
// alike, as Triton refuses it: Triton takes a batch of 0 as no batch
// dimension and sizes the input by dims alone (triton-inference-server/core
// src/infer_request.cc), so it expects 16 bytes and got 0. A tensor of no
// elements that is valid (shape [0, 4] for a non-batching model with dims
// [-1, -1]) reaches each kind of model and comes back empty with its
// shape. Both ways, JSON and binary tensor data, and the models answer
// the next request.
func TestZeroRows(t *testing.T) {
	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	base, _ := startServer(t, writeRepo(t, zeroRowModels(t)), serverOpts{backends: []core.Backend{py}})

	for _, kind := range []string{"onnx", "py", "ens"} {
		for _, binary := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s binary=%v", kind, binary), func(t *testing.T) {
				batching := kind + "_b"
				status, body := zeroRowInfer(t, base, batching, []int64{0, 4}, binary)
				want := "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model '" + batching + "'. Expected 16, got 0"
				if status != http.StatusBadRequest || body.Error != want {
					t.Errorf("%s [0,4]: %d %+v, want 400 %q", batching, status, body, want)
				}

				plain := kind + "_nb"
				status, body = zeroRowInfer(t, base, plain, []int64{0, 4}, binary)
				if status != http.StatusOK || len(body.Outputs) != 1 || !slices.Equal(body.Outputs[0].Shape, []int64{0, 4}) ||
					body.Outputs[0].Data == nil || len(*body.Outputs[0].Data) != 0 {
					t.Errorf("%s [0,4]: %d %+v, want 200 and an empty OUTPUT0 of shape [0,4]", plain, status, body)
				}

				// The models still serve a request with rows.
				for model, shape := range map[string][]int64{batching: {2, 4}, plain: {2, 4}} {
					if status, body := zeroRowInfer(t, base, model, shape, binary); status != http.StatusOK || len(body.Outputs) != 1 ||
						body.Outputs[0].Data == nil || len(*body.Outputs[0].Data) != 8 {
						t.Errorf("%s %v after the empty requests: %d %+v", model, shape, status, body)
					}
				}
			})
		}
	}
}

// zeroRowReply is the part of an infer reply the test reads.
type zeroRowReply struct {
	Error   string `json:"error"`
	Outputs []struct {
		Shape []int64    `json:"shape"`
		Data  *[]float32 `json:"data"`
	} `json:"outputs"`
}

// zeroRowInfer posts INPUT0 of shape with zeros as its values, as JSON
// data or binary data, and returns the status and the JSON reply.
func zeroRowInfer(t *testing.T, base, model string, shape []int64, binary bool) (int, zeroRowReply) {
	t.Helper()
	n := int(core.ElementCount(shape))
	in := map[string]any{"name": "INPUT0", "datatype": "FP32", "shape": shape}
	var raw []byte
	if binary {
		in["parameters"] = map[string]any{"binary_data_size": 4 * n}
		raw = make([]byte, 4*n)
	} else {
		in["data"] = make([]float32, n)
	}
	head, err := json.Marshal(map[string]any{"inputs": []any{in}})
	must(t, err)
	var header http.Header
	if binary {
		header = hdrLen(len(head))
	}
	status, _, b := do(t, http.MethodPost, base+"/v2/models/"+model+"/infer", header, strings.NewReader(string(head)+string(raw)))
	var reply zeroRowReply
	if err := json.Unmarshal(b, &reply); err != nil {
		t.Fatalf("%s: %d %q is not JSON: %v", model, status, b, err)
	}
	return status, reply
}
