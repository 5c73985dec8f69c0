package autopilot_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
)

// ortModel is a small MLP on ONNX Runtime with two instances allowed,
// the two CPUs the scaler may use split between them.
const ortModel = `backend: "onnxruntime"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
dynamic_batching { }
parameters { key: "slo_p99_ms" value { string_value: "50" } }
parameters { key: "slo_period_ms" value { string_value: "250" } }
parameters { key: "slo_max_cpus" value { string_value: "2" } }
`

// driveReq sends rate requests a second for d, open loop, each made by
// req; it counts the failures and the answers.
func driveReq(s *core.Server, rate float64, d time.Duration, req func() *core.InferRequest) (ok, failed int64, first error) {
	var wg sync.WaitGroup
	var okN, failN atomic.Int64
	var once sync.Once
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(at))
		wg.Go(func() {
			if _, err := s.Infer(context.Background(), req()); err != nil {
				failN.Add(1)
				once.Do(func() { first = err })
				return
			}
			okN.Add(1)
		})
	}
	wg.Wait()
	return okN.Load(), failN.Load(), first
}

func mlpRequest() *core.InferRequest {
	data := make([]byte, 0, 4*256)
	for i := range 256 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i%7)/7))
	}
	return &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
		{Name: "x", DataType: core.TypeFP32, Shape: []int64{1, 256}, Data: data}}}
}

// TestScalerONNX: an MLP on ONNX Runtime, two instances of (ORT's
// default) threads configured, at a rate one instance carries with room
// to spare: the scaler reloads it as one instance with both CPUs as its
// intra-op threads, which the config of the copy serving shows, while
// requests run and none fails. A user's unload and load of the model
// then bring back the configured two and start the scaler afresh.
func TestScalerONNX(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a model for several seconds")
	}
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		t.Fatalf("%v (run `make ort` or set ORT_LIB_PATH)", err)
	}
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backend.Close() })
	model, err := onnxbuild.MLP(256, 256, 2)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	s := startScaledWith(t, backend, ortModel, map[string][]byte{"1/model.onnx": model}, logs)
	if _, r := serving(t, s); r.Instances != 2 || r.Threads != 0 {
		t.Fatalf("before traffic: %d instances × %d threads, want the config's 2 × 0", r.Instances, r.Threads)
	}
	ok, failed, first := driveReq(s, 400, 4*time.Second, mlpRequest)
	mv, r := serving(t, s)
	for _, d := range instanceDecisions(r) {
		t.Logf("%d×%d → %d×%d: %s", d.FromInstances, d.FromThreads, d.Instances, d.Threads, d.Reason)
	}
	if failed != 0 {
		t.Fatalf("%d of %d requests failed across the reload: %v", failed, ok+failed, first)
	}
	if r.Instances != 1 || r.Threads != 2 {
		for _, l := range logs.with("autopilot") {
			t.Log(strings.TrimSpace(l))
		}
		t.Fatalf("at 400/s: %d instances × %d threads, want 1 × 2", r.Instances, r.Threads)
	}
	if got := mv.Config.GetParameters()["intra_op_thread_count"].GetStringValue(); got != "2" || mv.Config.GetInstanceGroup()[0].GetCount() != 1 {
		t.Fatalf("the serving copy's config: count %d, intra_op_thread_count %q", mv.Config.GetInstanceGroup()[0].GetCount(), got)
	}

	// A plain load of the unchanged model is a no-op, as in Triton: the
	// tuned copy stays. An unload and a load start afresh.
	if err := s.Load(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := serving(t, s); again != mv {
		t.Fatal("a plain load of the unchanged model reloaded it")
	}
	if err := s.Unload(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
	if mv, r = serving(t, s); r.Instances != 2 || len(instanceDecisions(r)) != 0 || mv.Config.GetInstanceGroup()[0].GetCount() != 2 {
		t.Fatalf("after the user's unload and load: %d instances, decisions %+v", r.Instances, instanceDecisions(r))
	}
}
