package core

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// TestLoadGauges reads a served version's load while one request runs and
// three wait, then once all have finished.
func TestLoadGauges(t *testing.T) {
	cfg := "max_batch_size: 8\ninput [ { name: \"x\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" +
		"output [ { name: \"y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\ndynamic_batching { }\n" + oneInstance
	s, b, a := busy(t, cfg, 1)
	for i := range 3 {
		a.send(context.Background(), batchReq(int32(10*i), 1, 1))
	}
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	l := mv.Load()
	if l.Pending != 3 || l.Busy != 1 || l.Instances != 1 {
		t.Fatalf("while busy: pending %d, busy %d of %d instances; want 3, 1 of 1", l.Pending, l.Busy, l.Instances)
	}
	if rows := step(t, b); rows != 3 {
		t.Fatalf("second execution ran %d rows, want the 3 queued", rows)
	}
	b.gate <- struct{}{}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	l = mv.Load()
	// Two executions of 1 and 3 rows: 2 rows on average of 8.
	if l.Pending != 0 || l.Busy != 0 || l.BatchFill != 0.25 {
		t.Fatalf("idle: pending %d, busy %d, batch fill %v; want 0, 0, 0.25", l.Pending, l.Busy, l.BatchFill)
	}
	if want := 4 / l.Window.Seconds(); l.Window <= 0 || math.Abs(l.RPS-want) > 1e-9 || l.EPS != 0 {
		t.Fatalf("rates over %v: rps %v eps %v; want %v and 0", l.Window, l.RPS, l.EPS, want)
	}
}

// TestLoadWindow checks the rates' window: from the load until a window
// has passed, then from a sample at least one window old.
func TestLoadWindow(t *testing.T) {
	mv := newModelVersion("m", 1, &modelconfig.ModelConfig{MaxBatchSize: 4})
	t0 := time.Unix(1000, 0)
	mv.Stats.loadedAt = t0
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// run records n successful requests run as one execution of batch n
	// busy for busy.
	run := func(n int, busy time.Duration) {
		for range n {
			mv.Stats.recordSuccess(requestTimes{}, time.Time{}, 1)
		}
		mv.Stats.recordExecution(uint64(n), 0, busy.Nanoseconds(), 0)
	}

	run(4, 100*time.Millisecond)
	l := mv.loadAt(ms(500))
	if l.Window != 500*time.Millisecond || l.RPS != 8 || l.BatchFill != 1 {
		t.Fatalf("first report: %+v; want window 500ms, rps 8, batch fill 1", l)
	}
	if l.Instances != 0 || l.Utilization != 0 {
		t.Fatalf("a version without a scheduler reports instances %d, utilization %v", l.Instances, l.Utilization)
	}
	// Still within the first window: measured from the load.
	run(2, 0)
	if l = mv.loadAt(ms(1000)); l.Window != time.Second || l.RPS != 6 || l.BatchFill != 0.75 {
		t.Fatalf("at 1s: %+v; want window 1s, rps 6, batch fill 0.75", l)
	}
	// The 1s sample becomes the next base once a window has passed.
	run(1, 0)
	if l = mv.loadAt(ms(2000)); l.Window != 2*time.Second || l.RPS != 3.5 {
		t.Fatalf("at 2s: %+v; want window 2s, rps 3.5", l)
	}
	if l = mv.loadAt(ms(2100)); l.Window != 1100*time.Millisecond || l.RPS != 1/1.1 || l.BatchFill != 0.25 {
		t.Fatalf("at 2.1s: %+v; want window 1.1s, rps 1/1.1, batch fill 0.25", l)
	}
	// Sparse reports: the base is the last sample kept, however old.
	if l = mv.loadAt(ms(3500)); l.Window != 2500*time.Millisecond || l.RPS != 0.4 {
		t.Fatalf("at 3.5s: %+v; want window 2.5s, rps 0.4", l)
	}
	// Nothing ran since the 2s base: no batch fill, zero rates.
	if l = mv.loadAt(ms(3600)); l.Window != 1600*time.Millisecond || l.RPS != 0 || l.BatchFill != 0 {
		t.Fatalf("at 3.6s: %+v; want window 1.6s, nothing ran", l)
	}
}
