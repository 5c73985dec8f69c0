package grpcapi

import (
	"sync"

	"github.com/inferd/inferd/core"
)

// sequenceOrder keeps one stream's requests to a sequence in the order the
// stream read them. Triton's stream handler hands each request to its core
// as it reads it, so the sequence batcher receives a sequence's requests
// in the order sent (triton-inference-server/server
// src/grpc/stream_infer_handler.cc); here every request runs on its own
// goroutine, so a request of a sequence waits until the one read before it
// in that sequence is in the model's queue (core.InferRequest.Queued), or
// has ended. Requests of models that take no part in sequences (neither
// sequence batching nor an ensemble step with it: core.ModelVersion.Sequenced)
// never wait.
type sequenceOrder struct {
	mu sync.Mutex
	// last is each sequence's latest request, closed when it ends.
	last map[sequenceKey]chan struct{}
}

// sequenceKey is one sequence of one model version.
type sequenceKey struct {
	mv *core.ModelVersion
	id core.Correlation // without flags
}

// enter places req (to the acquired version mv) after the requests read
// before it in its sequence: it returns a channel closed once the previous
// one is queued (nil when there is none to wait for) and leave, which
// marks req queued: set as req.Queued, and to call once req has ended in
// any case (nil when req is in no sequence; a second call does nothing).
func (o *sequenceOrder) enter(mv *core.ModelVersion, req *core.InferRequest) (wait <-chan struct{}, leave func()) {
	c := req.Correlation
	if !mv.Sequenced() || c.Missing() {
		return nil, nil
	}
	key := sequenceKey{mv: mv, id: c.Sequence()}
	done := make(chan struct{})
	o.mu.Lock()
	if o.last == nil {
		o.last = map[sequenceKey]chan struct{}{}
	}
	prev := o.last[key]
	o.last[key] = done
	o.mu.Unlock()
	var once sync.Once
	return prev, func() {
		once.Do(func() {
			close(done)
			o.mu.Lock()
			if o.last[key] == done {
				delete(o.last, key)
			}
			o.mu.Unlock()
		})
	}
}
