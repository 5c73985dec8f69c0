package httpapi

import (
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/sidebyside"
)

// BenchmarkBatchingGPU is figure 1 on a GPU: BenchmarkBatching's MLP on one
// KIND_GPU instance (sidebyside.MLPGPUConfig) served over HTTP (binary
// tensors, batch-1 requests, concurrency 16, dynamic batching) beside the
// same backend in-process executing batch-8 batches on the same GPU. It
// skips, saying why, where no GPU instance loads (no GPU, or no CUDA
// provider beside ONNX Runtime); deploy/gpu/check.sh runs it on GPU hosts:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkBatchingGPU -benchtime 3s
func BenchmarkBatchingGPU(b *testing.B) {
	model := onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers))
	root := writeRepo(b, map[string]testModel{"mlp_gpu": {config: sidebyside.MLPGPUConfig("mlp_gpu"), onnx: model}})
	ref, err := sidebyside.NewMLPGPUReference(b, root, "mlp_gpu")
	if err != nil {
		b.Skipf("no usable GPU: %v", err)
	}
	// The device the reference just ran on, as cmd/inferd finds it.
	base, srv := startServer(b, root, serverOpts{gpus: []int32{0}})

	x := sidebyside.MLPInput()
	header := sidebyside.MLPBinaryHeader()
	got, err := binaryInferer()(base+"/v2/models/mlp_gpu/infer", header, x)
	if err != nil {
		b.Fatalf("mlp_gpu: %v", err)
	}
	if err := sidebyside.CloseFP32(got["y"], ref.Y(b, x)); err != nil {
		b.Fatalf("mlp_gpu over HTTP differs from in-process: %v", err)
	}

	rs := sidebyside.Results{}
	rs.Run(b, "in-process-ort-gpu/batch8", sidebyside.MLPInstances, sidebyside.MLPBatch, ref.Batch8Caller(x))
	rs.RunExecutions(b, "http-binary-gpu/dynamic/c16", sidebyside.MLPConc, srv, "mlp_gpu", binaryCaller(base+"/v2/models/mlp_gpu/infer", header, x))
	rs.Report(b, sidebyside.Ratio{Unit: "http/ort-thru", Num: "http-binary-gpu/dynamic/c16", Den: "in-process-ort-gpu/batch8", Of: sidebyside.InferOf})
}
