package core

import (
	"slices"
	"sync"
)

// TakenOrder is preserve_ordering's queue: the jobs in the order they were
// taken, each answered (with the responses it held back) only once every
// job taken before it is (triton-inference-server/server
// docs/user_guide/batcher.md, "Preserve Ordering"). The dynamic batcher
// keeps one per model, the sequence batcher's oldest strategy one per
// instance.
type TakenOrder struct {
	mu    sync.Mutex
	order []*Job
}

// Taken appends jobs in the order they were taken.
func (o *TakenOrder) Taken(jobs ...*Job) {
	o.mu.Lock()
	o.order = append(o.order, jobs...)
	o.mu.Unlock()
}

// Finish marks j ended with err and answers, in order, the jobs at the
// head that have ended.
func (o *TakenOrder) Finish(j *Job, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	j.finished, j.err = true, err
	n := 0
	for n < len(o.order) && o.order[n].finished {
		h := o.order[n]
		h.release()
		h.TraceEnd(h.err)
		h.done <- h.err
		n++
	}
	o.order = slices.Delete(o.order, 0, n)
}
