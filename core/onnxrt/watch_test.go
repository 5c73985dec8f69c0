package onnxrt

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// A run that ends before watchAfter registers nothing on its context: a
// cancellable context costs what context.Background does.
func TestShortRunWatchAllocs(t *testing.T) {
	in := load(t, version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 16))),
		config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
	in.(*instance).watch.after = time.Hour
	a, b := make([]float64, 16), make([]float64, 16)
	batch := &core.ConcatBatch{
		Inputs:  []*core.Tensor{tensor(t, "INPUT0", ob.Int32, []int64{1, 16}, a), tensor(t, "INPUT1", ob.Int32, []int64{1, 16}, b)},
		Outputs: []string{"OUTPUT0", "OUTPUT1"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := func(ctx context.Context) float64 {
		return testing.AllocsPerRun(200, func() {
			if err := in.Execute(ctx, batch); err != nil {
				t.Fatal(err)
			}
		})
	}
	if bg, c := allocs(context.Background()), allocs(ctx); c > bg {
		t.Errorf("a short run on a cancellable context: %.1f allocations, %.1f on Background", c, bg)
	}
}

// With the watch armed at once, the timer's goroutine races the runs'
// ends: every run on a context cancelled only after it returned succeeds,
// runs cancelled during the loop fail only as cancelled, and a run after
// them all completes (no termination left set on the reused options).
func TestWatchRaces(t *testing.T) {
	in := load(t, version(t, "slow", slowModel(t)), config(t, ioConfig(0, ob.Float, "[-1, -1]", []string{"x"}, []string{"y"})))
	in.(*instance).watch.after = time.Nanosecond
	small := tensor(t, "x", ob.Float, []int64{2, 2}, []float64{0, 0, 0, 0})
	run := func(ctx context.Context) error {
		return in.Execute(ctx, &core.ConcatBatch{Inputs: []*core.Tensor{small}, Outputs: []string{"y"}})
	}
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		err := run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run %d, cancelled after it returned: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	cancelled := 0
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		wg.Go(func() {
			time.Sleep(time.Duration(i%7) * 20 * time.Microsecond)
			cancel()
		})
		if err := run(ctx); err != nil {
			if !errors.Is(err, context.Canceled) || core.CodeOf(err) != core.CodeCancelled {
				t.Fatalf("run %d: %v", i, err)
			}
			cancelled++
		}
		cancel()
	}
	wg.Wait()
	t.Logf("%d of 300 runs stopped by their cancellation", cancelled)
	if err := run(context.Background()); err != nil {
		t.Fatalf("a run after the cancellations: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := run(ctx); err != nil {
		t.Fatalf("a watched run after the cancellations: %v", err)
	}
}
