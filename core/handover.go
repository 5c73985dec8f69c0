package core

import (
	"context"
	"sync"
	"time"
)

// handover is a copy of a sequence model that a reload replaced while
// sequences were live on it: it goes on running those sequences' requests
// (the new copy routes them here) and closes once they have ended (END, or
// the idle timeout) and its in-flight requests are done. A START, even for
// an id live here, goes to the new copy. Triton itself sends every request
// to the new copy, where a sequence started on the old one fails for want
// of a START.
type handover struct {
	mv *ModelVersion
	b  SequenceScheduler

	mu   sync.Mutex
	shut bool          // no more requests are routed here
	cut  chan struct{} // closed to stop waiting for the live sequences
	once sync.Once
	done chan struct{} // closed once mv is closed
}

// handoverPoll is how often a handover looks whether its sequences ended.
const handoverPoll = 10 * time.Millisecond

// retireSequences closes mv in the background, after its live sequences
// when it is a sequence model; the returned handover (nil otherwise) is for
// the copy that replaces it to route those sequences' requests to.
// reacquire holds the copy serving mv's version from now on. A sequence
// model gets a handover even with no live sequence: a START that took mv
// just before the reload may yet begin one there.
func retireSequences(mv *ModelVersion, reacquire func() (*ModelVersion, func(), error)) *handover {
	b := mv.seqs
	if b == nil {
		go mv.close() // in-flight requests finish on the old copy
		return nil
	}
	mv.reacquire.Store(&reacquire)
	h := &handover{mv: mv, b: b, cut: make(chan struct{}), done: make(chan struct{})}
	go h.run()
	return h
}

func (h *handover) run() {
	defer close(h.done)
	t := time.NewTicker(handoverPoll)
	defer t.Stop()
wait:
	for !h.b.Retire(false) {
		select {
		case <-t.C:
		case <-h.cut:
			h.b.Retire(true)
			break wait
		}
	}
	h.mu.Lock()
	h.shut = true // from here on, no request takes a hold here
	h.mu.Unlock()
	h.mv.close()
}

// rerun runs req, a START refused by this retired copy, on the copy
// serving its version now.
func (mv *ModelVersion) rerun(ctx context.Context, req *InferRequest, emit func(*InferResponse, bool) error) (*Job, error) {
	nv, release, err := (*mv.reacquire.Load())()
	if err != nil {
		if req.Queued != nil {
			req.Queued()
		}
		return nil, rejected{err}
	}
	defer release()
	return nv.run(ctx, req, emit)
}

// stop makes h close without waiting for its live sequences (an unload or
// an exit) and returns a channel closed once it is closed.
func (h *handover) stop() <-chan struct{} {
	h.once.Do(func() { close(h.cut) })
	return h.done
}

// acquire holds h's copy for a request of sequence c when the sequence
// is live there, and returns the hold's release.
func (h *handover) acquire(c Correlation) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut || !h.b.Owns(c) {
		return nil, false
	}
	return h.mv.holds.acquire() // not retired: close comes after shut
}

// handoverFor is the replaced copy that runs req, a request of a sequence
// live there, holding it (the caller calls release), or nil.
func (mv *ModelVersion) handoverFor(req *InferRequest) (old *ModelVersion, release func()) {
	if len(mv.handovers) == 0 {
		return nil, nil
	}
	c := req.Correlation
	if c.Flags&FlagSequenceStart != 0 {
		if mv.seqs == nil || !mv.seqs.Stopping() {
			mv.endReplaced(c) // it starts over on this copy
		}
		// else the exit refuses the START: the sequence lives on.
		return nil, nil
	}
	if mv.seqs != nil && mv.seqs.Owns(c) {
		return nil, nil
	}
	for _, h := range mv.handovers {
		if release, ok := h.acquire(c); ok {
			return h.mv, release
		}
	}
	return nil, nil
}

// endReplaced ends sequence c on the replaced copies: it starts over on
// this one.
func (mv *ModelVersion) endReplaced(c Correlation) {
	for _, h := range mv.handovers {
		h.mu.Lock()
		if !h.shut {
			h.b.Forget(c)
		}
		h.mu.Unlock()
	}
}

// pendingHandovers are those of hs not yet closed: a copy passes them on
// to the one that replaces it, so reloads do not pile up closed ones.
func pendingHandovers(hs []*handover) []*handover {
	var out []*handover
	for _, h := range hs {
		select {
		case <-h.done:
		default:
			out = append(out, h)
		}
	}
	return out
}
