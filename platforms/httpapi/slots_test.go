package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlotsBound runs many goroutines through n slots: never more than n
// hold one at once, and every goroutine gets through (no lost wake-up).
func TestSlotsBound(t *testing.T) {
	for _, tc := range []struct{ slots, workers, each int }{
		{1, 8, 200},
		{2, 8, 200},
		{8, 32, 100},
	} {
		s := newSlots(tc.slots)
		var now, most atomic.Int64
		var wg sync.WaitGroup
		for range tc.workers {
			wg.Go(func() {
				for range tc.each {
					if err := s.acquire(context.Background()); err != nil {
						t.Error(err)
						return
					}
					n := now.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					now.Add(-1)
					s.free()
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d slots: stuck with %d held, %d waiting", tc.slots, s.used.Load(), s.waiters.Load())
		}
		if m := most.Load(); m > int64(tc.slots) || m < 1 {
			t.Errorf("%d slots: %d held at once", tc.slots, m)
		}
		if u, w := s.used.Load(), s.waiters.Load(); u != 0 || w != 0 {
			t.Errorf("%d slots: %d held, %d waiting after all returned", tc.slots, u, w)
		}
	}
}

// TestSlotsCancel: a request waiting for a slot leaves when its context
// ends, without taking one; a later release still serves the next.
func TestSlotsCancel(t *testing.T) {
	s := newSlots(1)
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.acquire(ctx); err != context.DeadlineExceeded {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- s.acquire(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	s.release()
	select {
	case err := <-got:
		if err != nil || s.used.Load() != 1 {
			t.Fatalf("after the release: %v, %d held", err, s.used.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not wake the waiter")
	}
}
