package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
)

// identityPy is an identity model.py; its config is set per benchmark.
const identityPy = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
`

// pythonBackend is the Python backend with an interpreter that has numpy.
func pythonBackend(b *testing.B) *python.Backend {
	pb := python.New(python.Options{Executable: servertest.Python(b), ArenaBytes: python.DefaultArenaBytes})
	b.Cleanup(func() { _ = pb.Close() })
	return pb
}

// identityPair writes an ONNX identity and a model.py identity with the
// same config (datatype dt, dims [-1], max_batch_size 8, two CPU
// instances) and serves both.
func identityPair(b *testing.B, dt string, elem onnxbuild.DataType) (base string, srv *core.Server) {
	cfg := func(name, backend string) string {
		return `name: "` + name + `"
backend: "` + backend + `"
max_batch_size: 8
input [ { name: "INPUT0" data_type: ` + dt + ` dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: ` + dt + ` dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`
	}
	root := servertest.WriteRepo(b, map[string]servertest.Model{
		"id_onnx": {Config: cfg("id_onnx", "onnxruntime"), ONNX: onnxbuild.Must(onnxbuild.Identity(elem, -1, -1))},
		"id_py":   {Config: cfg("id_py", "python"), ONNX: []byte{}},
	})
	must(b, os.WriteFile(filepath.Join(root, "id_py", "1", "model.py"), []byte(identityPy), 0o644))
	return startServer(b, root, serverOpts{backends: []core.Backend{pythonBackend(b)}})
}

// BenchmarkPythonIdentity measures, in one run on one server, an identity
// model.py against an ONNX identity with the same config, over HTTP binary
// tensors: INT32 [1,16] and FP32 [1, 1<<20] (4 MiB), each at concurrency
// 1 and 16. The "ratio" sub-benchmarks report Python over ONNX (the goals:
// p50 at c1 adds at most 100 µs, throughput at c16 at least 0.7x for the
// small tensor and 0.95x for 4 MiB; BENCHMARKS.md "Python backend"):
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkPythonIdentity -benchtime 3s -count 3
func BenchmarkPythonIdentity(b *testing.B) {
	for _, tc := range []struct {
		name, dt string
		elem     onnxbuild.DataType
		n        int
		concs    []int
	}{
		{"int32x16", "TYPE_INT32", onnxbuild.Int32, 16, []int{1, 16}},
		{"fp32x4MiB", "TYPE_FP32", onnxbuild.Float, 1 << 20, []int{1, 16}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			base, _ := identityPair(b, tc.dt, tc.elem)
			data := make([]byte, 4*tc.n)
			for i := range tc.n {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i%1000)))
			}
			datatype := map[string]string{"TYPE_INT32": "INT32", "TYPE_FP32": "FP32"}[tc.dt]
			header := `{"inputs":[{"name":"INPUT0","shape":[1,` + strconv.Itoa(tc.n) + `],"datatype":"` + datatype +
				`","parameters":{"binary_data_size":` + strconv.Itoa(len(data)) + `}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
			infer := binaryInferer()
			for _, m := range []string{"id_onnx", "id_py"} {
				out, err := infer(base+"/v2/models/"+m+"/infer", header, data)
				must(b, err)
				if !bytes.Equal(out["OUTPUT0"], data) {
					b.Fatalf("%s does not echo its input", m)
				}
			}
			rs := sidebyside.Results{}
			for _, conc := range tc.concs {
				c := "/c" + strconv.Itoa(conc)
				rs.Run(b, "onnx"+c, conc, 1, binaryCaller(base+"/v2/models/id_onnx/infer", header, data))
				rs.Run(b, "python"+c, conc, 1, binaryCaller(base+"/v2/models/id_py/infer", header, data))
			}
			rs.Report(b,
				sidebyside.Ratio{Unit: "py/onnx-p50-c1", Num: "python/c1", Den: "onnx/c1", Of: sidebyside.P50Of},
				sidebyside.Ratio{Unit: "py/onnx-thru-c16", Num: "python/c16", Den: "onnx/c16", Of: sidebyside.ReqOf},
			)
		})
	}
}

// BenchmarkPythonLoad measures loading a model.py whose module imports
// numpy (worker start, import, initialize; one instance) beside loading an
// ONNX identity, in explicit mode, each load after an unload:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkPythonLoad -benchtime 20x -count 3
func BenchmarkPythonLoad(b *testing.B) {
	cfg := func(name, backend string) string {
		return `name: "` + name + `"
backend: "` + backend + `"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	}
	root := servertest.WriteRepo(b, map[string]servertest.Model{
		"id_onnx": {Config: cfg("id_onnx", "onnxruntime"), ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))},
		"id_py":   {Config: cfg("id_py", "python"), ONNX: []byte{}},
	})
	must(b, os.WriteFile(filepath.Join(root, "id_py", "1", "model.py"), []byte("import numpy\n"+identityPy), 0o644))
	_, srv := startServer(b, root, serverOpts{mode: core.ModeExplicit, backends: []core.Backend{pythonBackend(b)}})
	for _, m := range []string{"id_onnx", "id_py"} {
		b.Run(m, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				start := time.Now()
				must(b, srv.Load(context.Background(), m, nil))
				total += time.Since(start)
				must(b, srv.Unload(context.Background(), m))
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "load-ms")
		})
	}
}
