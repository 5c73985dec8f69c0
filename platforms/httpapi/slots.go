package httpapi

import (
	"context"
	"sync/atomic"
)

// slots bounds the requests decoded or encoded at once (Options.Workers,
// --http-thread-count). Every request takes a slot twice, so a buffered
// channel (a lock every request of the server takes four times) was a
// point all cores met at; a free slot is now taken with one atomic
// compare-and-swap, and the channel only wakes requests that found none
// (BENCHMARKS.md, "Scaling with cores").
//
// A request that finds no slot counts itself in waiters, then tries again
// before it sleeps; a release frees its slot, then wakes a sleeper if it
// sees one. Go's atomics are sequentially consistent, so either the
// waiter's second try sees the freed slot or the release sees the waiter.
// A wake-up may find the slot taken again by a newcomer: the woken request
// sleeps again until the next release. Unlike the channel, slots are not
// handed out in arrival order.
type slots struct {
	max     int64
	used    atomic.Int64
	waiters atomic.Int64
	wake    chan struct{} // capacity max: one token per release that saw a waiter
	// free is release as a func value, made once (a method value per
	// call would allocate).
	free func()
}

func newSlots(n int) *slots {
	s := &slots{max: int64(n), wake: make(chan struct{}, n)}
	s.free = s.release
	return s
}

// tryAcquire takes a slot if one is free.
func (s *slots) tryAcquire() bool {
	for {
		n := s.used.Load()
		if n >= s.max {
			return false
		}
		if s.used.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquire takes a slot, waiting for one while ctx lasts.
func (s *slots) acquire(ctx context.Context) error {
	if s.tryAcquire() {
		return nil
	}
	done := ctx.Done()
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	for !s.tryAcquire() {
		select {
		case <-s.wake:
		case <-done:
			return ctx.Err()
		}
	}
	return nil
}

// release gives a slot back.
func (s *slots) release() {
	s.used.Add(-1)
	if s.waiters.Load() > 0 {
		select {
		case s.wake <- struct{}{}:
		default: // max tokens are pending already: their sleepers will try
		}
	}
}
