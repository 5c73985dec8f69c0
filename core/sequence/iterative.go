package sequence

import (
	"time"

	"github.com/inferd/inferd/core"
)

// Reschedulable lets the model of j reschedule it (core.ExecRequest's
// Reschedule) when the model has iterative_sequence and j runs in a
// sequence.
func (b *seqBatcher) Reschedulable(j *core.Job) bool { return b.cfg.iterative && slotOf(j) != nil }

// requeue puts j, which its model rescheduled, back in its slot's queue
// with its controls for a request without START, as Triton's
// IterativeSequencer::RescheduleRequest enqueues it again with flags 0; the
// state inputs are added again when it is taken. It reports false when j's
// sequence ended meanwhile (idle timeout); b.mu is held.
func (b *seqBatcher) requeue(j *core.Job) bool {
	key := keyOf(j.Request().Correlation)
	slot := slotOf(j)
	if b.active[key] != slot {
		return false
	}
	j.Request().Requeue(func(r *core.ExecRequest) {
		n := len(r.Inputs) - len(b.cfg.states) - len(b.cfg.controls) // the request's own inputs
		r.Inputs = r.Inputs[:n:n]
		r.Correlation.Flags = 0
		b.cfg.addControls(r)
	})
	j.MarkQueued()
	b.stats.AddPending(1)
	b.touch(key, time.Now())
	b.enqueue(slot, j)
	return true
}

// endIterative ends the sequence of j, an iterative request released for
// good, as Triton's IterativeSequencer does with a cancelled END: its slot
// is freed once the requests queued there have run; b.mu is held.
func (b *seqBatcher) endIterative(j *core.Job) {
	key := keyOf(j.Request().Correlation)
	slot := slotOf(j)
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
