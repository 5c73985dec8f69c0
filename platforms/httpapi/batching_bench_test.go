package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/sidebyside"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The compute-bound model of figures 1 and 2: an FP32 MLP of mlpLayers
// fully connected 1024→1024 layers (16 MiB of weights, beyond the per-core
// L2), whose batch-8 run takes about 1 ms with one intra-op thread on the
// development VM (batch 1: about 0.75 ms, the weights' bandwidth dominates).
const (
	mlpIn, mlpHidden, mlpLayers = 1024, 1024, 4
	mlpBatch                    = 8 // max_batch_size, and the in-process batch
	mlpInstances                = 1 // one instance, one intra-op thread: a core of two stays for HTTP
	mlpConc                     = 16
	mlpQueueDelayMicros         = 500
)

// mlpConfig is the MLP's config; batching adds the dynamic_batching block.
func mlpConfig(name string, batching bool) string {
	cfg := fmt.Sprintf(`name: %q
platform: "onnxruntime_onnx"
max_batch_size: %d
input [ { name: "x" data_type: TYPE_FP32 dims: [ %d ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ %d ] } ]
instance_group [ { kind: KIND_CPU count: %d } ]
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
`, name, mlpBatch, mlpIn, mlpHidden, mlpInstances)
	if batching {
		cfg += fmt.Sprintf("dynamic_batching { max_queue_delay_microseconds: %d }\n", mlpQueueDelayMicros)
	}
	return cfg
}

// BenchmarkBatching measures, in one run, the compute-bound MLP served over
// HTTP (binary tensors, batch-1 requests, concurrency 16) with dynamic
// batching on and off, and the same backend in-process executing batch-8
// batches back to back on as many instances with the same thread settings.
// The "ratio" sub-benchmark reports HTTP-with-batching over in-process
// throughput (BENCHMARKS.md, figure 1) and batching on over off, for
// throughput and p50 latency (figure 2):
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkBatching -benchtime 3s
func BenchmarkBatching(b *testing.B) {
	model := onnxbuild.Must(onnxbuild.MLP(mlpIn, mlpHidden, mlpLayers))
	root := writeRepo(b, map[string]testModel{
		"mlp_batched":   {config: mlpConfig("mlp_batched", true), onnx: model},
		"mlp_unbatched": {config: mlpConfig("mlp_unbatched", false), onnx: model},
	})
	base, srv := startServer(b, root, serverOpts{})

	x := make([]byte, 0, 4*mlpIn)
	for i := range mlpIn {
		x = binary.LittleEndian.AppendUint32(x, math.Float32bits(float32(math.Sin(float64(i)))))
	}
	header := `{"inputs":[{"name":"x","shape":[1,` + strconv.Itoa(mlpIn) + `],"datatype":"FP32","parameters":{"binary_data_size":` +
		strconv.Itoa(len(x)) + `}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`

	// In-process: a second backend with the same options as startServer's
	// and instances of the same config, each executing batch-8 batches.
	cfg, err := modelconfig.Parse([]byte(mlpConfig("mlp_batched", true)))
	must(b, err)
	must(b, modelconfig.Normalize(cfg, "mlp_batched", true))
	lib, err := onnxrt.FindLibrary("")
	must(b, err)
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, DefaultMaxBatchSize: 4})
	must(b, err)
	defer backend.Close()
	insts := make(chan core.Instance, mlpInstances)
	for k := range mlpInstances {
		inst, err := backend.NewInstance(context.Background(), core.InstanceSpec{
			VersionFiles: core.VersionFiles{ModelName: "mlp_batched", Version: 1, ModelDir: root + "/mlp_batched", VersionDir: root + "/mlp_batched/1"},
			Name:         "mlp_batched_0_" + strconv.Itoa(k), Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
		})
		must(b, err)
		defer inst.Close()
		insts <- inst
	}
	x8 := bytes.Repeat(x, mlpBatch)
	ortCall := func() error {
		inst := <-insts
		defer func() { insts <- inst }()
		batch := &core.Batch{
			Inputs:  []*core.Tensor{{Name: "x", DataType: core.TypeFP32, Shape: []int64{mlpBatch, mlpIn}, Data: x8}},
			Outputs: []string{"y"},
		}
		return inst.Execute(context.Background(), batch)
	}

	// Both paths compute the same thing.
	want := mlpInProcess(b, insts, x)
	for _, m := range []string{"mlp_batched", "mlp_unbatched"} {
		h, body := binaryRequest(header, x)
		status, rh, rb := do(b, "POST", base+"/v2/models/"+m+"/infer", h, bytes.NewReader(body))
		if status != 200 {
			b.Fatalf("%s: status %d: %s", m, status, rb)
		}
		n, err := strconv.Atoi(rh.Get("Inference-Header-Content-Length"))
		must(b, err)
		if err := closeFP32(rb[n:], want); err != nil {
			b.Fatalf("%s over HTTP differs from in-process: %v", m, err)
		}
	}

	rs := sidebyside.Results{}
	rs.Run(b, "in-process-ort/batch8", mlpInstances, mlpBatch, ortCall)
	for _, c := range []struct{ name, model string }{
		{"http-binary/dynamic/c16", "mlp_batched"},
		{"http-binary/none/c16", "mlp_unbatched"},
	} {
		call := binaryCaller(base+"/v2/models/"+c.model+"/infer", header, x)
		b.Run(c.name, func(b *testing.B) {
			before := modelStats(b, srv, c.model)
			rs.Record(b, c.name, sidebyside.Measure(b, mlpConc, call))
			reportExecutions(b, before, modelStats(b, srv, c.model))
		})
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "http/ort-thru", Num: "http-binary/dynamic/c16", Den: "in-process-ort/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "dyn/none-thru", Num: "http-binary/dynamic/c16", Den: "http-binary/none/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "dyn/none-p50", Num: "http-binary/dynamic/c16", Den: "http-binary/none/c16", Of: sidebyside.P50Of},
	)
}

// modelStats is a snapshot of the statistics of model's ready version.
func modelStats(b *testing.B, srv *core.Server, model string) core.StatsSnapshot {
	vs := srv.ReadyVersions(model)
	if len(vs) != 1 {
		b.Fatalf("%s: %d ready versions", model, len(vs))
	}
	return vs[0].Stats.Snapshot()
}

// reportExecutions reports, from two statistics snapshots, the mean batch
// size the server executed and the mean ONNX Runtime run time per execution
// (compute_infer), which grows when the load generator and the server take
// CPU from the instance's thread.
func reportExecutions(b *testing.B, before, after core.StatsSnapshot) {
	execs := after.ExecutionCount - before.ExecutionCount
	if execs == 0 {
		return
	}
	b.ReportMetric(float64(after.InferenceCount-before.InferenceCount)/float64(execs), "batch/exec")
	var infer uint64
	for _, bs := range after.Batches {
		infer += bs.ComputeInfer.Ns
	}
	for _, bs := range before.Batches {
		infer -= bs.ComputeInfer.Ns
	}
	b.ReportMetric(float64(infer)/float64(execs)/1e3, "run-µs/exec")
}

// mlpInProcess runs one batch-1 execution of x on an instance of insts and
// returns y.
func mlpInProcess(b *testing.B, insts chan core.Instance, x []byte) []byte {
	inst := <-insts
	defer func() { insts <- inst }()
	batch := &core.Batch{
		Inputs:  []*core.Tensor{{Name: "x", DataType: core.TypeFP32, Shape: []int64{1, mlpIn}, Data: x}},
		Outputs: []string{"y"},
	}
	must(b, inst.Execute(context.Background(), batch))
	return batch.Results[0].Data
}

// closeFP32 compares two little-endian FP32 buffers with a tolerance: a
// batch-8 GEMM may round differently from a batch-1 one.
func closeFP32(got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes, want %d", len(got), len(want))
	}
	for i := 0; i < len(got); i += 4 {
		g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[i:])))
		w := float64(math.Float32frombits(binary.LittleEndian.Uint32(want[i:])))
		if math.Abs(g-w) > 1e-4*max(1, math.Abs(w)) {
			return fmt.Errorf("element %d = %v, want %v", i/4, g, w)
		}
	}
	return nil
}
