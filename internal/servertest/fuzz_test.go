package servertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// fuzzSeeds are configs over the `simple` graph (INPUT0, INPUT1 -> OUTPUT0,
// OUTPUT1, INT32 [-1,16]) that reach the gather/scatter paths: batching,
// ragged and batch inputs, reshapes, optional inputs, warmup, policies.
var fuzzSeeds = []string{
	`max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
	`max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 100 }`,
	`max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT data_type: TYPE_INT32 source_input: "INPUT0" } ]`,
	`max_batch_size: 8 batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "N" data_type: TYPE_FP32 source_input: "INPUT0" } ] dynamic_batching { }`,
	`max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ] dynamic_batching { }`,
	`max_batch_size: 0 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1, 16 ] reshape { shape: [ 16 ] } } ]`,
	`max_batch_size: 8 output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4, 4 ] reshape { shape: [ 16 ] } } ]`,
	`max_batch_size: 8 input [ { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] optional: true } ]`,
	`max_batch_size: 8 model_warmup [ { name: "w" batch_size: 2 inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } } inputs { key: "INPUT1" value { data_type: TYPE_INT32 dims: [ 16 ] random_data: true } } } ]`,
	`max_batch_size: 8 dynamic_batching { priority_levels: 2 default_priority_level: 1 default_queue_policy { max_queue_size: 1 timeout_action: DELAY default_timeout_microseconds: 10 } }`,
	`max_batch_size: 8 output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] label_filename: "labels.txt" } ]`,
	`max_batch_size: 8 batch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]`,
	`max_batch_size: 8 sequence_batching { }`,
	`max_batch_size: 8 model_transaction_policy { decoupled: true }`,
	`max_batch_size: 8 instance_group [ { kind: KIND_CPU count: 2 } ] dynamic_batching { preserve_ordering: true }`,
}

// FuzzLoadConfig loads fuzzed configs over a real ONNX model and sends one
// request built from whatever config loaded. The oracle: nothing panics
// and nothing hangs; any error is a fine answer.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	root := f.TempDir()
	dir := filepath.Join(root, "m")
	Must(f, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
	Must(f, os.WriteFile(filepath.Join(dir, "1", "model.onnx"), onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)), 0o644))
	srv := Start(f, Options{Repo: root, Mode: core.ModeExplicit})
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := modelconfig.Parse([]byte(text))
		if err != nil || !bounded(cfg) {
			return
		}
		Must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(text), 0o644))
		// Both bounds stay under the fuzzing engine's own 10 s, past which
		// it reports the input as a hung process.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Load(ctx, "m", nil); err != nil {
			t.Logf("load: %v", err)
			return
		}
		mv, release, err := srv.Acquire("m", core.LatestVersion)
		if err != nil {
			return
		}
		req := requestFor(mv.Config)
		release()
		if req == nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := srv.Infer(ctx, req)
			t.Logf("infer: %v", err)
		}()
		select {
		case <-done:
		case <-time.After(8 * time.Second):
			t.Fatalf("request hung on config:\n%s", text)
		}
	})
}

// bounded keeps the fuzzer to configs that a test machine can run: the
// oracle is that the server survives, not that it has unbounded memory.
func bounded(cfg *modelconfig.ModelConfig) bool {
	small := func(dims []int64) bool {
		n := int64(1)
		for _, d := range dims {
			if d > 1<<12 {
				return false
			}
			n *= max(d, 1)
		}
		return n <= 1<<16
	}
	if cfg.GetMaxBatchSize() > 64 {
		return false
	}
	// A request may rightly wait out a long queue delay; the fuzzer
	// cannot wait hours for it.
	if cfg.GetDynamicBatching().GetMaxQueueDelayMicroseconds() > 1e6 {
		return false
	}
	for _, g := range cfg.GetInstanceGroup() {
		if g.GetCount() > 4 {
			return false
		}
	}
	for _, w := range cfg.GetModelWarmup() {
		if w.GetCount() > 4 || w.GetBatchSize() > 64 {
			return false
		}
		for _, in := range w.GetInputs() {
			if !small(in.GetDims()) {
				return false
			}
		}
	}
	for _, in := range cfg.GetInput() {
		if !small(in.GetDims()) {
			return false
		}
	}
	return true
}

// requestFor builds a zero-filled request for cfg's inputs, variable dims
// set to 1 and a batch of 1 when the model batches; nil when it cannot.
func requestFor(cfg *modelconfig.ModelConfig) *core.InferRequest {
	req := &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion}
	for _, in := range cfg.GetInput() {
		dt := core.DataType(in.GetDataType())
		if !dt.Valid() {
			return nil
		}
		var shape []int64
		if cfg.GetMaxBatchSize() > 0 {
			shape = append(shape, 1)
		}
		for _, d := range in.GetDims() {
			shape = append(shape, max(d, 1))
		}
		n := core.ElementCount(shape)
		if len(shape) == 0 {
			n = 1
		}
		if n < 0 || n > 1<<16 {
			return nil
		}
		var data []byte
		if dt == core.TypeBytes {
			for range n {
				data = core.AppendBytesElement(data, nil)
			}
		} else {
			data = make([]byte, n*int64(dt.ByteSize()))
		}
		req.Inputs = append(req.Inputs, &core.Tensor{Name: in.GetName(), DataType: dt, Shape: shape, Data: data})
	}
	return req
}
