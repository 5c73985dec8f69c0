package dynamic_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// capture is an Autopilot that keeps the scheduler of the version it is
// asked to watch, and watches nothing.
type capture struct{ b chan core.BatchScheduler }

func (c capture) Watch(_ *core.ModelVersion, b core.BatchScheduler) core.SLOWatch {
	c.b <- b
	return nil
}

// TestTuneCap: a cap set through Tune bounds a batch's rows below
// max_batch_size even past the queue delay, where Triton's rule sends up
// to max_batch_size; a request larger than the cap still runs, alone;
// clearing the cap restores max_batch_size.
func TestTuneCap(t *testing.T) {
	c := capture{b: make(chan core.BatchScheduler, 1)}
	cfg := "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1000 }\n" +
		"input [ { name: \"x\" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: \"y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" + oneInstance
	s, b, err := startEchoWith(t, cfg, false, nil, core.Options{Autopilot: c})
	if err != nil {
		t.Fatal(err)
	}
	tuner := (<-c.b).(core.Tuner)
	tuner.Tune(core.BatchTuning{Delay: time.Millisecond, Preferred: []int64{2}, MaxBatch: 3})
	if got := tuner.Tuning(); got.MaxBatch != 3 || !slices.Equal(got.Preferred, []int64{2}) {
		t.Fatalf("Tuning %+v", got)
	}
	a := &async{t: t, s: s, b: b}
	a.send(context.Background(), batchReq(0, 1, 1))
	started(t, b)
	// Queued behind the running one, waiting past the delay: 7 one-row
	// requests and one of 5 rows.
	for i := range 7 {
		a.send(context.Background(), batchReq(int32(i+1), 1, 1))
	}
	a.send(context.Background(), batchReq(100, 5, 1))
	waitFor(t, "8 queued", func() bool { return a.entered() == 9 })
	time.Sleep(5 * time.Millisecond)
	var sizes []int
	for len(sizes) < 4 {
		sizes = append(sizes, step(t, b))
	}
	if want := []int{3, 3, 1, 5}; !slices.Equal(sizes, want) {
		t.Errorf("batches %v, want %v (cap 3; the 5-row request alone)", sizes, want)
	}
	tuner.Tune(core.BatchTuning{Delay: time.Millisecond})
	if got := tuner.Tuning(); got.MaxBatch != 0 || !slices.Equal(got.Preferred, []int64{8}) {
		t.Errorf("cleared: Tuning %+v, want no cap and preferred max_batch_size", got)
	}
	for i := range 8 {
		a.send(context.Background(), batchReq(int32(200+i), 1, 1))
	}
	time.Sleep(5 * time.Millisecond)
	if n := step(t, b); n != 8 {
		t.Errorf("without the cap a batch of %d rows, want 8", n)
	}
	b.gate <- struct{}{}
}
