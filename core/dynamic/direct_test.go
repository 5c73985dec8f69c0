package dynamic_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

const directModel = `max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

// TestDirectRun: a lone request to an idle instance runs on its caller's
// goroutine unless the configuration asks the queue to decide when it
// runs.
func TestDirectRun(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"default scheduler", "", "direct"},
		{"dynamic batching without delay", "dynamic_batching { }\n", "direct"},
		{"priority levels", "dynamic_batching { priority_levels: 2 default_priority_level: 1 }\n", "direct"},
		{"queue delay", "dynamic_batching { max_queue_delay_microseconds: 100 }\n", "worker"},
		{"preserve ordering", "dynamic_batching { preserve_ordering: true }\n", "worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b, err := startEcho(t, directModel+tc.cfg, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			b.runners = true
			b.mu.Unlock()
			for i := range 3 {
				resp, err := s.Infer(context.Background(), batchReq(int32(i), 1, 16))
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Outputs[0].Data; len(got) != 64 {
					t.Fatalf("output of %d bytes", len(got))
				}
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if want := []string{tc.want, tc.want, tc.want}; !slices.Equal(b.runnersBy, want) {
				t.Errorf("executions ran on %v, want %v", b.runnersBy, want)
			}
		})
	}
}

// TestDirectKeepsQueueOrder: while a request runs on its caller's
// goroutine, later ones queue; the worker runs them in order once the
// instance is free, and a request that arrives while one is queued never
// overtakes it.
func TestDirectKeepsQueueOrder(t *testing.T) {
	s, b := echoServer(t, directModel)
	b.mu.Lock()
	b.runners = true
	b.mu.Unlock()
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	errs := make(chan error, 3)
	infer := func(base int32) {
		go func() {
			_, err := s.Infer(context.Background(), batchReq(base, 1, 16))
			errs <- err
		}()
	}
	infer(100)
	<-b.started // 100 runs, holding the one instance
	infer(200)
	waitFor(t, "200 queued", func() bool { return mv.Stats.Snapshot().Pending == 1 })
	infer(300)
	waitFor(t, "300 queued", func() bool { return mv.Stats.Snapshot().Pending == 2 })
	for i := range 3 {
		if i > 0 {
			select {
			case <-b.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the queued request did not start")
			}
		}
		b.gate <- struct{}{}
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a request did not end")
		}
	}
	batches, _ := b.executions()
	var firsts []int32
	for _, x := range batches {
		firsts = append(firsts, x[0])
	}
	if want := []int32{100, 200, 300}; !slices.Equal(firsts, want) {
		t.Errorf("executions in order %v, want %v", firsts, want)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if want := []string{"direct", "worker", "worker"}; !slices.Equal(b.runnersBy, want) {
		t.Errorf("executions ran on %v, want %v", b.runnersBy, want)
	}
}

// TestDirectOnlyWhenIdle: a request that arrives while another executes
// goes through the queue to an idle instance's worker, not onto its
// caller's goroutine: lanes serve a lone request, and under load direct
// runs cost the tail. Once every instance is idle again, the next request
// runs directly.
func TestDirectOnlyWhenIdle(t *testing.T) {
	s, b := echoServer(t, strings.Replace(directModel, "count: 1", "count: 2", 1))
	b.mu.Lock()
	b.runners = true
	b.mu.Unlock()
	errs := make(chan error, 2)
	infer := func(base int32) {
		go func() {
			_, err := s.Infer(context.Background(), batchReq(base, 1, 16))
			errs <- err
		}()
	}
	infer(100)
	<-b.started // 100 runs on one instance, the other is idle
	infer(200)
	select {
	case <-b.started: // 200 runs on the idle instance, beside 100
	case <-time.After(10 * time.Second):
		t.Fatal("the second request did not start on the idle instance")
	}
	for range 2 {
		b.gate <- struct{}{}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	infer(300)
	<-b.started
	b.gate <- struct{}{}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if want := []string{"direct", "worker", "direct"}; !slices.Equal(b.runnersBy, want) {
		t.Errorf("executions ran on %v, want %v", b.runnersBy, want)
	}
}

// TestDirectRunOutlastsUnload: an unload that begins while a request runs
// on its caller's goroutine waits for it; the request succeeds.
func TestDirectRunOutlastsUnload(t *testing.T) {
	s, b := echoServer(t, directModel)
	errs := make(chan error, 1)
	go func() {
		_, err := s.Infer(context.Background(), batchReq(7, 1, 16))
		errs <- err
	}()
	<-b.started
	unloaded := make(chan error, 1)
	go func() { unloaded <- s.Unload(context.Background(), "m") }()
	select {
	case err := <-unloaded:
		t.Fatalf("unload returned while the request ran: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.gate <- struct{}{}
	if err := <-errs; err != nil {
		t.Fatalf("request: %v", err)
	}
	if err := <-unloaded; err != nil {
		t.Fatalf("unload: %v", err)
	}
}

// TestDirectUnderLoad: many callers, some of whose requests are cancelled
// before or while they run, share two instances through their lanes and
// the queue; every request ends (answered or cancelled), nothing stays
// pending, and an unload at the end waits for the last ones.
func TestDirectUnderLoad(t *testing.T) {
	const callers, each = 16, 150
	s, b, err := startEcho(t, strings.Replace(directModel, "count: 1", "count: 2", 1), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	var ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ctx, cancel := context.WithCancel(context.Background())
				switch (c + i) % 7 {
				case 0:
					cancel() // before it is submitted
				case 1:
					go cancel() // while it is on its way or running
				}
				resp, err := s.Infer(ctx, batchReq(int32(i), 1, 16))
				cancel()
				switch {
				case err == nil && len(resp.Outputs) == 1:
					ok.Add(1)
				case err != nil && ctx.Err() != nil:
					cancelled.Add(1)
				default:
					t.Errorf("caller %d request %d: %v", c, i, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("requests did not all end")
	}
	if got := ok.Load() + cancelled.Load(); got != callers*each {
		t.Fatalf("%d requests ended, want %d", got, callers*each)
	}
	if ok.Load() == 0 || b.execs.Load() < ok.Load() {
		t.Fatalf("%d answered, %d executions", ok.Load(), b.execs.Load())
	}
	if p := mv.Stats.Snapshot().Pending; p != 0 {
		t.Fatalf("%d requests still pending", p)
	}
	release()
	if err := s.Unload(context.Background(), "m"); err != nil {
		t.Fatalf("unload: %v", err)
	}
}
