package autopilot_test

import (
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
)

// pythonModel is testdata/costly's model.py (3 ms plus 0.25 ms a row) on
// two Python instances, under a 100 ms target.
const pythonModel = `backend: "python"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
dynamic_batching { }
parameters { key: "slo_p99_ms" value { string_value: "100" } }
parameters { key: "slo_period_ms" value { string_value: "250" } }
`

func costlyRequest() *core.InferRequest {
	var data []byte
	for range 4 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(1))
	}
	return &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
		{Name: "x", DataType: core.TypeFP32, Shape: []int64{1, 4}, Data: data}}}
}

// TestScalerPython: a model.py on two worker processes at a rate one
// carries with room to spare: the scaler reloads it on one, new workers
// starting beside the old, and no request fails across the reload.
func TestScalerPython(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a model for several seconds")
	}
	py := python.New(python.Options{Executable: servertest.Python(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { _ = py.Close() })
	src, err := os.ReadFile("testdata/costly/1/model.py")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	s := startScaledWith(t, py, pythonModel, map[string][]byte{"1/model.py": src}, logs)
	ok, failed, first := driveReq(s, 150, 6*time.Second, costlyRequest)
	mv, r := serving(t, s)
	for _, d := range instanceDecisions(r) {
		t.Logf("%d → %d: %s", d.FromInstances, d.Instances, d.Reason)
	}
	if failed != 0 {
		t.Fatalf("%d of %d requests failed across the reload: %v", failed, ok+failed, first)
	}
	if r.Instances != 1 || mv.Config.GetInstanceGroup()[0].GetCount() != 1 {
		for _, l := range logs.with("autopilot") {
			t.Log(strings.TrimSpace(l))
		}
		t.Fatalf("at 150/s: %d instances, want 1", r.Instances)
	}
}
