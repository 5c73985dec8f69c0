package sidebyside

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The compute-bound model of BENCHMARKS.md figures 1 and 2, which the HTTP
// and gRPC batching benchmarks serve: an FP32 MLP (onnxbuild.MLP(MLPIn,
// MLPHidden, MLPLayers)) of fully connected 1024→1024 layers (16 MiB of
// weights, beyond the per-core L2), whose batch-8 run takes about 1 ms with
// one intra-op thread on the development VM (batch 1: about 0.75 ms, the
// weights' bandwidth dominates).
const (
	MLPIn, MLPHidden, MLPLayers = 1024, 1024, 4
	MLPBatch                    = 8 // max_batch_size, and the in-process batch
	MLPInstances                = 1 // one instance, one intra-op thread: a core of two stays for the frontend
	MLPConc                     = 16
	MLPQueueDelayMicros         = 500
)

// MLPConfig is the MLP's config; batching adds the dynamic_batching block.
func MLPConfig(name string, batching bool) string {
	cfg := fmt.Sprintf(`name: %q
platform: "onnxruntime_onnx"
max_batch_size: %d
input [ { name: "x" data_type: TYPE_FP32 dims: [ %d ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ %d ] } ]
instance_group [ { kind: KIND_CPU count: %d } ]
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
`, name, MLPBatch, MLPIn, MLPHidden, MLPInstances)
	if batching {
		cfg += fmt.Sprintf("dynamic_batching { max_queue_delay_microseconds: %d }\n", MLPQueueDelayMicros)
	}
	return cfg
}

// MLPInput is the one batch-1 input x the benchmarks send: MLPIn
// little-endian FP32 values sin(i).
func MLPInput() []byte {
	x := make([]byte, 0, 4*MLPIn)
	for i := range MLPIn {
		x = binary.LittleEndian.AppendUint32(x, math.Float32bits(float32(math.Sin(float64(i)))))
	}
	return x
}

// MLPBinaryHeader is the JSON header of an HTTP request that sends
// MLPInput as a binary tensor (Triton's binary tensor data extension,
// triton-inference-server/server docs/protocol/extension_binary_data.md)
// and asks for y the same way.
func MLPBinaryHeader() string {
	return `{"inputs":[{"name":"x","shape":[1,` + strconv.Itoa(MLPIn) + `],"datatype":"FP32","parameters":{"binary_data_size":` +
		strconv.Itoa(4*MLPIn) + `}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`
}

// MLPReference is the in-process side of the batching benchmarks: a second
// ONNX Runtime backend with the same options as servertest.Start's and
// MLPInstances instances of model's batching config (the model folder
// written under root), executed through Instance.Execute without a
// frontend or a scheduler.
type MLPReference struct {
	insts chan core.BatchInstance
}

// NewMLPReference loads the reference; it closes when the benchmark ends.
func NewMLPReference(b *testing.B, root, model string) *MLPReference {
	b.Helper()
	r, err := newMLPReference(b, root, model, MLPConfig(model, true), modelconfig.ModelInstanceGroup_KIND_CPU)
	must(b, err)
	return r
}

// newMLPReference loads MLPInstances instances of kind with config cfgText.
func newMLPReference(b *testing.B, root, model, cfgText string, kind modelconfig.ModelInstanceGroup_Kind) (*MLPReference, error) {
	cfg, err := modelconfig.Parse([]byte(cfgText))
	if err != nil {
		return nil, err
	}
	if err := modelconfig.Normalize(cfg, model, true); err != nil {
		return nil, err
	}
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		return nil, err
	}
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, DefaultMaxBatchSize: 4})
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { _ = backend.Close() })
	r := &MLPReference{insts: make(chan core.BatchInstance, MLPInstances)}
	dir := filepath.Join(root, model)
	for k := range MLPInstances {
		inst, err := backend.NewBatchInstance(context.Background(), core.InstanceSpec{
			VersionFiles: core.VersionFiles{ModelName: model, Version: 1, ModelDir: dir, VersionDir: filepath.Join(dir, "1")},
			Name:         model + "_0_" + strconv.Itoa(k), Kind: kind, Config: cfg,
		})
		if err != nil {
			return nil, err
		}
		b.Cleanup(func() { _ = inst.Close() })
		r.insts <- inst
	}
	return r, nil
}

// execute runs one batch of x (batch rows) on a free instance.
func (r *MLPReference) execute(x []byte, batch int) (*core.ConcatBatch, error) {
	inst := <-r.insts
	defer func() { r.insts <- inst }()
	bt := &core.ConcatBatch{
		Inputs:  []*core.Tensor{{Name: "x", DataType: core.TypeFP32, Shape: []int64{int64(batch), MLPIn}, Data: x}},
		Outputs: []string{"y"},
	}
	return bt, inst.Execute(context.Background(), bt)
}

// Y runs one batch-1 execution of x and returns y.
func (r *MLPReference) Y(b *testing.B, x []byte) []byte {
	bt, err := r.execute(x, 1)
	must(b, err)
	return bt.Results[0].Data
}

// Batch8Caller is a call executing x repeated MLPBatch times as one batch,
// for MeasureBatch with batch MLPBatch.
func (r *MLPReference) Batch8Caller(x []byte) func() error {
	x8 := bytes.Repeat(x, MLPBatch)
	return func() error {
		_, err := r.execute(x8, MLPBatch)
		return err
	}
}

// CloseFP32 compares two little-endian FP32 buffers with a tolerance: a
// batch-8 GEMM may round differently from a batch-1 one.
func CloseFP32(got, want []byte) error {
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

// ModelStats is a snapshot of the statistics of model's ready version.
func ModelStats(b *testing.B, srv *core.Server, model string) core.StatsSnapshot {
	vs := srv.ReadyVersions(model)
	if len(vs) != 1 {
		b.Fatalf("%s: %d ready versions", model, len(vs))
	}
	return vs[0].Stats.Snapshot()
}

// ReportExecutions reports, from two statistics snapshots, the mean batch
// size the server executed and the mean ONNX Runtime run time per execution
// (compute_infer), which grows when the load generator and the server take
// CPU from the instance's thread.
func ReportExecutions(b *testing.B, before, after core.StatsSnapshot) {
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

// RunExecutions measures call as sub-benchmark name over conc workers, as
// Run does for batch-1 calls, and reports the executions model's version
// on srv made meanwhile (ReportExecutions).
func (rs Results) RunExecutions(b *testing.B, name string, conc int, srv *core.Server, model string, call func() error) {
	b.Run(name, func(b *testing.B) {
		before := ModelStats(b, srv, model)
		rs.Record(b, name, Measure(b, conc, call))
		ReportExecutions(b, before, ModelStats(b, srv, model))
	})
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
