package servertest

import (
	"os"
	"path/filepath"
	"testing"
)

// paramsPy answers each request with its parameters as the model reads
// them: PARAMS holds request.parameters(), a JSON object.
const paramsPy = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PARAMS", np.array([r.parameters()], dtype=np.object_))])
                for r in requests]
`

// WriteParamsModel writes the model.py folder root/name: input IN (FP32
// [1]), output PARAMS (BYTES [1], the request's parameters as JSON), for
// the tests of what reaches a Python model's request.parameters(). It
// needs the Python backend.
func WriteParamsModel(t testing.TB, root, name string) {
	t.Helper()
	dir := filepath.Join(root, name)
	Must(t, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
	Must(t, os.WriteFile(filepath.Join(dir, "1", "model.py"), []byte(paramsPy), 0o644))
	config := `name: "` + name + `"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`
	Must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(config), 0o644))
}
