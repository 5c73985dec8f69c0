package core

import (
	"errors"
	"time"
)

// errRescheduled is end's report for a request its model rescheduled.
var errRescheduled = errors.New("request rescheduled")

// Reschedule asks for r to run again in a later execution rather than end
// with this one: Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
// (pb_utils' request.set_release_flags), for a model with
// iterative_sequence only. The request keeps its sequence, slot and
// state; it comes back without START. A decoupled model may go on sending
// its non-final responses.
func (r *ExecRequest) Reschedule() error {
	if !r.iterative() {
		return Errorf(CodeInvalidArg, "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final {
		return errFinished
	}
	r.rescheduled = true
	return nil
}

// iterative reports whether r runs in a sequence of a model with
// iterative_sequence.
func (r *ExecRequest) iterative() bool {
	j := r.job
	if j == nil || j.seq == nil {
		return false
	}
	b, ok := j.runner.(*seqBatcher)
	return ok && b.cfg.iterative
}

// requeue puts j, which its model rescheduled, back in its slot's queue
// with its controls for a request without START, as Triton's
// IterativeSequencer::RescheduleRequest enqueues it again with flags 0; the
// state inputs are added again when it is taken. It reports false when j's
// sequence ended meanwhile (idle timeout); b.mu is held.
func (b *seqBatcher) requeue(j *Job) bool {
	key := keyOf(j.req.Correlation)
	if b.active[key] != j.seq {
		return false
	}
	r := &j.req
	r.mu.Lock()
	r.rescheduled = false
	n := len(r.Inputs) - len(b.cfg.states) - len(b.cfg.controls) // the request's own inputs
	r.Inputs = r.Inputs[:n:n]
	r.Correlation.Flags = 0
	b.cfg.addControls(r)
	r.mu.Unlock()
	j.state = jobQueued
	b.stats.addPending(1)
	b.touch(key, time.Now())
	b.enqueue(j.seq, j)
	return true
}

// endIterative ends the sequence of j, an iterative request released for
// good, as Triton's IterativeSequencer does with a cancelled END: its slot
// is freed once the requests queued there have run; b.mu is held.
func (b *seqBatcher) endIterative(j *Job) {
	key := keyOf(j.req.Correlation)
	slot := j.seq
	if b.active[key] != slot {
		return // already ended (idle timeout)
	}
	delete(b.active, key)
	delete(b.lastSeen, key)
	if len(slot.queue) == 0 {
		b.release(slot)
		return
	}
	slot.reaped = true
	wake(slot.inst)
}
