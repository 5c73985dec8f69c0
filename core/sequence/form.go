package sequence

import (
	"slices"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// droppedJob is a queued request that form dropped, with the error its
// worker answers it with.
type droppedJob struct {
	j   *core.Job
	err error
}

// form takes the next execution of si off its slots, or says how long to
// wait (0: for a wake-up) and whether the worker is done. It drops the
// requests whose client went away and releases the slots of sequences the
// reaper ended once their queues are empty.
func (b *seqBatcher) form(si *seqInstance, now time.Time) (jobs []*core.Job, dropped []droppedJob, wait time.Duration, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var heads []*core.Job
	var earliest time.Time
	for _, slot := range si.slots {
		for len(slot.queue) > 0 {
			j := slot.queue[0]
			if j.Context().Err() != nil {
				// Its client went away: it does not run. An END taken out
				// this way still ends the sequence.
				slot.queue = slot.queue[1:]
				b.stats.AddPending(-1)
				dropped = append(dropped, droppedJob{j, core.Cancelled(j.Context())})
				switch {
				case j.Request().Correlation.Flags&core.FlagSequenceEnd != 0:
					b.release(slot)
				case b.cfg.iterative:
					b.endIterative(j)
				}
				continue
			}
			break
		}
		if len(slot.queue) == 0 {
			if slot.reaped {
				b.release(slot)
			}
			if len(slot.queue) == 0 {
				continue
			}
		}
		j := slot.queue[0]
		j.Owned = slot
		heads = append(heads, j)
		if earliest.IsZero() || j.QueuedAt().Before(earliest) {
			earliest = j.QueuedAt()
		}
	}
	if len(heads) == 0 {
		return nil, dropped, 0, b.closed
	}
	limit := int(max(1, b.cfg.maxBS))
	waited := now.Sub(earliest)
	if b.cfg.oldest {
		// Oldest first, as a dynamic batcher over the candidates' heads.
		slices.SortStableFunc(heads, func(x, y *core.Job) int { return x.QueuedAt().Compare(y.QueuedAt()) })
	} else if b.cfg.delay > 0 && b.cfg.minUtil > 0 && waited <= b.cfg.delay &&
		float64(len(heads))/float64(limit) < b.cfg.minUtil {
		return nil, dropped, b.cfg.delay - waited + time.Microsecond, false
	}
	states := make([][]*core.Tensor, 0, len(heads))
	var batch []*core.Job
	for _, j := range heads {
		if len(batch) == limit {
			break
		}
		st := b.stateInputs(j)
		if len(batch) > 0 && !b.compatible(batch[0], states[0], j, st) {
			continue
		}
		batch = append(batch, j)
		states = append(states, st)
	}
	if b.cfg.oldest && b.cfg.delay > 0 && len(batch) < limit && waited < b.cfg.delay {
		// As the dynamic batcher: run at the largest preferred size
		// reached, else wait for more until the delay is up.
		k := len(batch)
		for k > 0 && !slices.Contains(b.cfg.pref, int64(k)) {
			k--
		}
		if k == 0 {
			return nil, dropped, b.cfg.delay - waited + time.Microsecond, false
		}
		batch, states = batch[:k], states[:k]
	}
	for i, j := range batch {
		slot := slotOf(j)
		slot.queue[0] = nil
		slot.queue = slot.queue[1:]
		if len(slot.queue) == 0 {
			slot.queue = slot.queue[:0:0]
		}
		r := j.Request()
		r.SetInputs(append(r.Inputs, states[i]...))
		j.MarkTaken(now)
	}
	if b.cfg.preserve {
		si.order.Taken(batch...)
	}
	b.stats.AddPending(-int64(len(batch)))
	if !b.cfg.oldest && b.cfg.batching {
		return b.pad(batch, slotOf(heads[len(heads)-1]).idx), dropped, 0, false
	}
	return batch, dropped, 0, false
}

// pad spreads batch, a direct execution's requests in slot order, over
// the slots 0 to top (the highest slot with a request ready), a not-ready
// request in each slot without one of batch's, as Triton's
// DirectSequenceBatch does (triton-inference-server/core
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc), so a
// sequence's row is its slot's. The not-ready requests have no slot
// (job.seq nil): their responses go nowhere and their states are not kept.
func (b *seqBatcher) pad(batch []*core.Job, top int) []*core.Job {
	if len(batch) == top+1 {
		return batch
	}
	out := make([]*core.Job, top+1)
	for _, j := range batch {
		out[slotOf(j).idx] = j
	}
	for k, j := range out {
		if j == nil {
			out[k] = b.notReady(batch[0])
		}
	}
	return out
}

// notReady is Triton's null request, a copy of rep for a slot with no
// request ready: zeroed inputs and states of rep's shapes (Triton leaves
// them unset; the model must not read them), START, END and READY false,
// CORRID 0 ("the model can't assume that any other inputs are meaningful,
// including CORRID").
func (b *seqBatcher) notReady(rep *core.Job) *core.Job {
	// Run by rep's Runner: a decoupled model's sends after the execution
	// reach it as a real request's do.
	ins := rep.Request().Inputs
	first := len(ins) - len(b.cfg.states) - len(b.cfg.controls) // the first control's index
	out := make([]*core.Tensor, len(ins))
	for i, t := range ins {
		z := &core.Tensor{Name: t.Name, DataType: t.DataType, Shape: slices.Clone(t.Shape), Data: zeroData(t.DataType, core.ElementCount(t.Shape))}
		if k := i - first; k >= 0 && k < len(b.cfg.controls) &&
			b.cfg.controls[k].kind != modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID {
			z.Data = b.cfg.controls[k].off
		}
		out[i] = z
	}
	return rep.Filler(out)
}
