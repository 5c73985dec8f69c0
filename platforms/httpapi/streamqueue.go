package httpapi

import (
	"sync"
	"time"

	"github.com/inferd/inferd/core"
)

// Bounds of one /generate_stream (streamGenerate): the events the model
// has produced that the client has not yet taken, and how long one write
// may wait for the client.
const (
	streamQueueEvents  = 1024
	streamQueueBytes   = 32 << 20
	streamWriteTimeout = 30 * time.Second
)

// errStreamBehind ends a stream whose client does not take the responses
// as fast as the model produces them.
var errStreamBehind = core.Errorf(core.CodeUnavailable, "the client is not reading the stream: more than %d responses or %d bytes are waiting to be written", streamQueueEvents, streamQueueBytes)

// streamEvent is one SSE event's JSON object and, for a stream's first
// event, the status it sets.
type streamEvent struct {
	obj    []byte
	status int
}

// streamQueue carries one stream's events from the model's sends, which
// must never wait for the client, to the handler's goroutine, which
// writes them. Once the stream fails (the queue overflowed, or a write
// failed) every put fails too, the request is cancelled, and a write
// blocked on the client is ended at once.
type streamQueue struct {
	wake chan struct{} // signalled when events arrive

	mu          sync.Mutex
	events      []streamEvent
	bytes       int
	err         error // why the stream failed
	closed      bool  // the handler is done with the connection
	setDeadline func(time.Time)
	cancel      func(error)
}

// newStreamQueue returns the queue of a stream whose connection's write
// deadline setDeadline sets and whose request cancel ends.
func newStreamQueue(setDeadline func(time.Time), cancel func(error)) *streamQueue {
	return &streamQueue{wake: make(chan struct{}, 1), setDeadline: setDeadline, cancel: cancel}
}

// put queues ev without waiting. It fails when the stream has failed, and
// fails the stream when its queue is full (one event always fits).
func (q *streamQueue) put(ev streamEvent) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	if len(q.events) > 0 && (len(q.events) >= streamQueueEvents || q.bytes+len(ev.obj) > streamQueueBytes) {
		q.failLocked(errStreamBehind)
		return q.err
	}
	q.events = append(q.events, ev)
	q.bytes += len(ev.obj)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// take returns the queued events and empties the queue.
func (q *streamQueue) take() []streamEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.bytes = nil, 0
	return evs
}

// arm sets the deadline of the next write, unless the stream has failed
// (under the lock, so a failure's expired deadline is never overwritten).
func (q *streamQueue) arm() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.setDeadline(time.Now().Add(streamWriteTimeout))
	return nil
}

// fail ends the stream with err, unless it has failed already.
func (q *streamQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failLocked(err)
}

func (q *streamQueue) failLocked(err error) {
	if q.err != nil {
		return
	}
	q.err, q.events, q.bytes = err, nil, 0
	if !q.closed {
		q.setDeadline(time.Now())
	}
	q.cancel(err)
}

// failed says why the stream failed, or nil.
func (q *streamQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// close marks the connection as no longer the queue's to touch.
func (q *streamQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
}
