package core

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// TestUtilizationGauges reads a served version's utilization while one
// request runs and three wait, then once all have finished.
func TestUtilizationGauges(t *testing.T) {
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
	u := mv.Utilization()
	if u.Pending != 3 || u.Busy != 1 || u.Instances != 1 {
		t.Fatalf("while busy: pending %d, busy %d of %d instances; want 3, 1 of 1", u.Pending, u.Busy, u.Instances)
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
	u = mv.Utilization()
	// Two executions of 1 and 3 rows: 2 rows on average of 8.
	if u.Pending != 0 || u.Busy != 0 || u.BatchFill != 0.25 {
		t.Fatalf("idle: pending %d, busy %d, batch fill %v; want 0, 0, 0.25", u.Pending, u.Busy, u.BatchFill)
	}
	if want := 4 / u.Window.Seconds(); u.Window <= 0 || math.Abs(u.RPS-want) > 1e-9 || u.EPS != 0 {
		t.Fatalf("rates over %v: rps %v eps %v; want %v and 0", u.Window, u.RPS, u.EPS, want)
	}
}

// TestUtilizationWindow checks the rates' window: from the load until a
// window has passed, then from a sample at least one window old.
func TestUtilizationWindow(t *testing.T) {
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
	u := mv.utilizationAt(ms(500))
	if u.Window != 500*time.Millisecond || u.RPS != 8 || u.BatchFill != 1 {
		t.Fatalf("first report: %+v; want window 500ms, rps 8, batch fill 1", u)
	}
	if u.Instances != 0 || u.Compute != 0 {
		t.Fatalf("a version without a scheduler reports instances %d, utilization %v", u.Instances, u.Compute)
	}
	// Still within the first window: measured from the load.
	run(2, 0)
	if u = mv.utilizationAt(ms(1000)); u.Window != time.Second || u.RPS != 6 || u.BatchFill != 0.75 {
		t.Fatalf("at 1s: %+v; want window 1s, rps 6, batch fill 0.75", u)
	}
	// The 1s sample becomes the next base once a window has passed.
	run(1, 0)
	if u = mv.utilizationAt(ms(2000)); u.Window != 2*time.Second || u.RPS != 3.5 {
		t.Fatalf("at 2s: %+v; want window 2s, rps 3.5", u)
	}
	if u = mv.utilizationAt(ms(2100)); u.Window != 1100*time.Millisecond || u.RPS != 1/1.1 || u.BatchFill != 0.25 {
		t.Fatalf("at 2.1s: %+v; want window 1.1s, rps 1/1.1, batch fill 0.25", u)
	}
	// Sparse reports: the base is the last sample kept, however old.
	if u = mv.utilizationAt(ms(3500)); u.Window != 2500*time.Millisecond || u.RPS != 0.4 {
		t.Fatalf("at 3.5s: %+v; want window 2.5s, rps 0.4", u)
	}
	// Nothing ran since the 2s base: no batch fill, zero rates.
	if u = mv.utilizationAt(ms(3600)); u.Window != 1600*time.Millisecond || u.RPS != 0 || u.BatchFill != 0 {
		t.Fatalf("at 3.6s: %+v; want window 1.6s, nothing ran", u)
	}
}
