package dynamic

import (
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/ratelimit"
)

// A lane is one instance's right to execute. When a request arrives with
// nothing queued and every instance idle, the request's own goroutine claims
// the instance's lane and runs the execution itself: the instance's worker
// goroutine is neither woken to run it nor to hand the answer back, two
// goroutine switches (and, with idle processors, an OS thread's wake-up)
// that a lone small request would otherwise pay on every call. Which
// requests run, and in which order, is what the queue would have decided:
// the queue is empty and the instance would have taken the request at
// once. The worker keeps the lane while it executes, and for as long as it
// finds the next batch due, and no request claims a lane while any
// instance executes, so under load nothing changes.
type lane struct {
	inst core.Instance
	// busy is set while the worker or a direct caller executes on inst.
	// It is set only under scheduler.mu (both claims look at the queue
	// there), and cleared by its holder alone.
	busy atomic.Bool
	// freed wakes the worker after a direct caller gave the lane back.
	freed chan struct{}

	// The direct caller's execution state (the worker has its own).
	e    core.Execution
	errs []error
	jobs []*core.Job
}

// lanesFor gives each instance a lane where a request may run on its
// caller's goroutine: not under the rate limiter (which orders executions
// by its own rules), preserve_ordering, a decoupled model (whose sends
// outlive the execution) or a max_queue_delay (a lone request then waits
// to be batched), and not for instances that pipeline or go out of service
// (Python workers: their own workers track which are idle).
func lanesFor(sc schedConfig, insts []core.Instance, limits ratelimit.Slots) []*lane {
	if limits != nil || sc.preserve || sc.decoupled || (sc.batching && sc.delay > 0) {
		return nil
	}
	lanes := make([]*lane, len(insts))
	for i, inst := range insts {
		if p, ok := inst.(Pipeliner); ok && p.Depth() > 1 {
			return nil
		}
		if _, ok := inst.(core.Standby); ok {
			return nil
		}
		lanes[i] = &lane{inst: inst, freed: make(chan struct{}, 1)}
	}
	return lanes
}

// await blocks while a direct caller holds the lane.
func (ln *lane) await() {
	for ln != nil && ln.busy.Load() {
		<-ln.freed
	}
}

// claim returns an idle instance's lane for j to run on, with j marked
// taken, or nil: the scheduler has no lanes, something is queued (a direct
// run would overtake it), the scheduler is closed, or any instance is
// busy. Lanes are for a lone request: once an instance executes, the
// server is under load and the queue's workers run what comes, because
// executions on the callers' goroutines then cost the tail (at 256
// connections p99 and the maximum rose 1.1 to 1.3 times, BENCHMARKS.md
// "Tail latency") for a few per cent of throughput. A claimed run counts
// in s.wg, so close waits for it.
func (s *scheduler) claim(j *core.Job) *lane {
	if len(s.lanes) == 0 || j.Caller().Queued != nil {
		// Queued: the caller waits to see the request queued before it
		// sends the next one of its sequence; keep that a queue's matter.
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || j.Context().Err() != nil {
		return nil // submit's own checks answer it
	}
	if s.cfg.delay > 0 {
		return nil // tuned to wait for a batch since the lanes were made (Tune)
	}
	for _, lv := range s.levels {
		if lv.count > 0 {
			return nil
		}
	}
	for _, ln := range s.lanes {
		if ln.busy.Load() {
			return nil
		}
	}
	ln := s.lanes[0]
	ln.busy.Store(true)
	s.wg.Add(1)
	return ln
}

// runDirect executes j, claimed on ln, on the calling goroutine and
// answers it.
func (s *scheduler) runDirect(ln *lane, j *core.Job) {
	j.TraceBegin()
	j.MarkTaken(time.Now())
	ln.jobs = append(ln.jobs[:0], j)
	s.busy.Add(1)
	ln.errs = core.RunExecution(ln.inst, s.cfg.model, s.cfg.decoupled, s.stats, ln.jobs, s.log, &ln.e, ln.errs)
	s.busy.Add(-1)
	err := ln.errs[0]
	ln.jobs[0] = nil
	ln.busy.Store(false)
	select {
	case ln.freed <- struct{}{}:
	default:
	}
	s.wg.Done()
	if err != core.ErrPending {
		s.finish(j, err)
	}
}
