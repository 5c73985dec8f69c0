package httpapi

import (
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/sidebyside"
)

// BenchmarkBatching measures, in one run, the compute-bound MLP of
// figures 1 and 2 (sidebyside.MLPConfig) served over HTTP (binary tensors,
// batch-1 requests, concurrency 16) with dynamic batching on and off, and
// the same backend in-process executing batch-8 batches back to back on as
// many instances with the same thread settings (sidebyside.MLPReference).
// The "ratio" sub-benchmark reports HTTP-with-batching over in-process
// throughput (BENCHMARKS.md, figure 1) and batching on over off, for
// throughput and p50 latency (figure 2):
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkBatching -benchtime 3s
func BenchmarkBatching(b *testing.B) {
	model := onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers))
	root := writeRepo(b, map[string]testModel{
		"mlp_batched":   {config: sidebyside.MLPConfig("mlp_batched", true), onnx: model},
		"mlp_unbatched": {config: sidebyside.MLPConfig("mlp_unbatched", false), onnx: model},
	})
	base, srv := startServer(b, root, serverOpts{})

	x := sidebyside.MLPInput()
	header := sidebyside.MLPBinaryHeader()
	ref := sidebyside.NewMLPReference(b, root, "mlp_batched")

	// Both paths compute the same thing.
	want := ref.Y(b, x)
	infer := binaryInferer()
	for _, m := range []string{"mlp_batched", "mlp_unbatched"} {
		got, err := infer(base+"/v2/models/"+m+"/infer", header, x)
		if err != nil {
			b.Fatalf("%s: %v", m, err)
		}
		if err := sidebyside.CloseFP32(got["y"], want); err != nil {
			b.Fatalf("%s over HTTP differs from in-process: %v", m, err)
		}
	}

	rs := sidebyside.Results{}
	rs.Run(b, "in-process-ort/batch8", sidebyside.MLPInstances, sidebyside.MLPBatch, ref.Batch8Caller(x))
	for _, c := range []struct{ name, model string }{
		{"http-binary/dynamic/c16", "mlp_batched"},
		{"http-binary/none/c16", "mlp_unbatched"},
	} {
		rs.RunExecutions(b, c.name, sidebyside.MLPConc, srv, c.model, binaryCaller(base+"/v2/models/"+c.model+"/infer", header, x))
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "http/ort-thru", Num: "http-binary/dynamic/c16", Den: "in-process-ort/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "dyn/none-thru", Num: "http-binary/dynamic/c16", Den: "http-binary/none/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "dyn/none-p50", Num: "http-binary/dynamic/c16", Den: "http-binary/none/c16", Of: sidebyside.P50Of},
	)
}
