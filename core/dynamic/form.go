package dynamic

import (
	"slices"
	"time"

	"github.com/inferd/inferd/core"
)

// form applies Triton's batch-forming rules (triton-inference-server/core
// src/dynamic_batch_scheduler.cc) to the queue at time now. It returns the batch to run,
// or nil and how long to wait before looking again (< 0: queue empty, wait
// for an arrival).
func (s *scheduler) form(now time.Time) ([]*core.Job, time.Duration) {
	var batch []*core.Job
	var sum int64
	prefAt := -1     // batch length at the preferred point
	stopped := false // stopped by max batch size or a shape mismatch
	var oldest time.Time
	var soonest time.Time // nearest DELAY deadline among the candidates
	var toks tokens       // the token budget's account (padbatch)
	for _, lv := range s.levels {
		lv.compact(now)
		for _, list := range [2][]*core.Job{lv.jobs[lv.head:], lv.delayed} {
			for _, j := range list {
				if !j.Waiting() || j.Context().Err() != nil {
					continue // a cancelled one is about to be answered by its hook
				}
				if len(batch) == 0 {
					batch = append(batch, j)
					sum, oldest = j.Size(), j.QueuedAt()
					if s.cfg.pad != nil {
						toks.start(s.length(j), j.Size())
					}
					if !s.cfg.batching {
						return batch, 0
					}
					if slices.Contains(s.cfg.pref, sum) {
						prefAt = 1
					}
					if q := &j.Queue; lv.policy.delay && !q.Delayed && q.Deadline.After(now) {
						soonest = q.Deadline
					}
					continue
				}
				if s.cfg.pad != nil && s.cfg.pad.Budget > 0 {
					fit := toks.admit(s.length(j), j.Size(), s.cfg.pad.Budget)
					if fit == skip && !s.cfg.preserve {
						continue // stays queued, in order, for a batch of its length
					}
					if fit != join {
						stopped = true // full, or (preserve_ordering) not to be passed
						break
					}
				}
				if sum+j.Size() > s.cfg.maxPref && prefAt < 0 {
					prefAt = len(batch)
				}
				if sum+j.Size() > s.cfg.limit() || !s.compatible(batch[0], j) {
					stopped = true
					break
				}
				batch = append(batch, j)
				sum += j.Size()
				if j.QueuedAt().Before(oldest) {
					oldest = j.QueuedAt()
				}
				if q := &j.Queue; lv.policy.delay && !q.Delayed && q.Deadline.After(now) && (soonest.IsZero() || q.Deadline.Before(soonest)) {
					soonest = q.Deadline
				}
				if slices.Contains(s.cfg.pref, sum) {
					prefAt = len(batch)
				}
			}
			if stopped {
				break
			}
		}
		if stopped {
			break
		}
	}
	if len(batch) == 0 {
		return nil, -1
	}
	waited := now.Sub(oldest)
	d := s.cfg.delay
	switch {
	case prefAt > 0 && (d == 0 || waited < d):
		return batch[:prefAt], 0
	case stopped || sum >= s.cfg.maxPref || s.budgetFull(&toks), d == 0 || waited >= d:
		return batch, 0
	}
	wait := d - waited
	if !soonest.IsZero() && soonest.Sub(now) < wait {
		wait = soonest.Sub(now)
	}
	return nil, wait
}

// maxSpread is how much longer than the shortest the longest row of a
// token-budget batch may be: rows within 2× of each other waste at most half
// of the padded tokens, and in a mix of short and long texts the short
// ones still batch with each other.
const maxSpread = 2

// tokens is the account of a token-budget batch being formed: the
// shortest and longest padded length and the rows so far.
type tokens struct{ lo, hi, rows int64 }

// fit is what admit says of a candidate.
type fit int

const (
	join fit = iota // joins the batch
	skip            // too far from the batch's lengths: left queued
	full            // would pass the budget or max_batch_size: the batch is done
)

func (t *tokens) start(length, rows int64) { t.lo, t.hi, t.rows = length, length, rows }

// admit decides on a candidate of length and rows, and takes it in when it
// joins.
func (t *tokens) admit(length, rows, budget int64) fit {
	lo, hi := min(t.lo, length), max(t.hi, length)
	if hi > maxSpread*max(lo, 1) {
		return skip
	}
	if (t.rows+rows)*hi > budget {
		return full
	}
	t.lo, t.hi, t.rows = lo, hi, t.rows+rows
	return join
}

// budgetFull reports whether a token-budget batch can take no further row:
// one more, however short, would pass the budget.
func (s *scheduler) budgetFull(t *tokens) bool {
	return s.cfg.pad != nil && s.cfg.pad.Budget > 0 && (t.rows+1)*t.hi > s.cfg.pad.Budget
}

// length is j's padded length: the longest last dim of its paddable inputs.
func (s *scheduler) length(j *core.Job) int64 {
	var n int64
	for _, t := range j.Request().Inputs {
		if _, ok := s.cfg.pad.Pads(t.Name); ok && len(t.Shape) > 0 {
			n = max(n, t.Shape[len(t.Shape)-1])
		}
	}
	return n
}

// compact drops answered jobs from the head of the level and, under a
// DELAY policy, moves jobs whose timeout passed to the delayed tail. It is
// O(1) per taken job unless DELAY timeouts are configured.
func (lv *level) compact(now time.Time) {
	for lv.head < len(lv.jobs) && !lv.jobs[lv.head].Waiting() {
		lv.jobs[lv.head] = nil
		lv.head++
	}
	switch {
	case lv.head == len(lv.jobs):
		lv.jobs, lv.head = lv.jobs[:0], 0
	case lv.head > 64 && lv.head > len(lv.jobs)/2:
		n := copy(lv.jobs, lv.jobs[lv.head:])
		clear(lv.jobs[n:])
		lv.jobs, lv.head = lv.jobs[:n], 0
	}
	if lv.policy.delay && lv.policy.timeout > 0 {
		keep := lv.jobs[:lv.head]
		for _, j := range lv.jobs[lv.head:] {
			switch {
			case !j.Waiting():
			case !j.Queue.Deadline.IsZero() && !now.Before(j.Queue.Deadline):
				j.Queue.Delayed = true
				lv.delayed = append(lv.delayed, j)
			default:
				keep = append(keep, j)
			}
		}
		clear(lv.jobs[len(keep):])
		lv.jobs = keep
	}
	if len(lv.delayed) > 0 {
		live := lv.delayed[:0]
		for _, j := range lv.delayed {
			if j.Waiting() {
				live = append(live, j)
			}
		}
		clear(lv.delayed[len(live):])
		lv.delayed = live
	}
}

// compatible reports whether j may join a batch started by first: inputs
// whose dims are variable and not ragged must have the same shape, as in
// triton-inference-server/core src/dynamic_batch_scheduler.cc.
func (s *scheduler) compatible(first, j *core.Job) bool {
	a, b := first.Request().Inputs, j.Request().Inputs
	if s.cfg.sameSet && len(a) != len(b) {
		return false
	}
	for i, t := range b {
		if s.cfg.sameSet && a[i].Name != t.Name {
			return false
		}
		if !s.cfg.enforced[t.Name] {
			continue
		}
		var ref *core.Tensor
		if i < len(a) && a[i].Name == t.Name {
			ref = a[i]
		} else {
			for _, x := range a {
				if x.Name == t.Name {
					ref = x
				}
			}
		}
		if ref == nil {
			return false
		}
		if _, ok := s.cfg.pad.Pads(t.Name); ok {
			// The gather pads the last dim; the others must agree.
			if len(ref.Shape) != len(t.Shape) || len(t.Shape) < 2 || !slices.Equal(ref.Shape[1:len(ref.Shape)-1], t.Shape[1:len(t.Shape)-1]) {
				return false
			}
			continue
		}
		if !slices.Equal(ref.Shape[1:], t.Shape[1:]) {
			return false
		}
	}
	return true
}
