package trace

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// TestChildAfterFinish: a child that a Python model's background thread
// (an async BLS call) or a decoupled model after its final response opens,
// begins and ends while or after the client's trace is finished neither
// races with Finish (go test -race) nor lands in the written trace.
func TestChildAfterFinish(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = filepath.Join(t.TempDir(), "t.json"), LevelTimestamps|LevelTensors, 1
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		r := m.Start("bls", nil)
		now := time.Now()
		c := r.Core()
		c.Begin("bls", 1, "", now, now, nil)
		early := c.Child() // opened before the response, ends after Finish
		early.Begin("late", 1, "", now, now, nil)
		c.End(core.TraceTimes{RequestEnd: now}, nil)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 20 {
				early.Output([]*core.Tensor{{Name: "OUT", DataType: core.TypeInt32, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}}})
				early.End(core.TraceTimes{ComputeStart: now, ComputeInputEnd: now, ComputeOutputStart: now, ComputeEnd: now, RequestEnd: now}, nil)
				late := c.Child()
				late.Begin("late", 1, "", now, now, nil)
				late.End(core.TraceTimes{RequestEnd: now}, nil)
			}
		})
		wg.Go(func() {
			r.Stamp("HTTP_SEND_START", now)
			r.Finish()
		})
		wg.Wait()
		// After Finish, whatever a straggler records is dropped.
		c.Child().Begin("late", 1, "", now, now, nil)
		r.Stamp("HTTP_SEND_END", now)
		r.Finish() // a second Finish writes nothing more
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := traces(readRecords(t, cfg.File)); n != 50 {
		t.Fatalf("%d client traces in the file, want 50", n)
	}
	for _, rec := range readRecords(t, cfg.File) {
		if ts, ok := rec["timestamps"].([]any); ok && ts[0].(map[string]any)["name"] == "HTTP_SEND_END" {
			t.Fatalf("a stamp after Finish was written: %v", rec)
		}
	}
}
