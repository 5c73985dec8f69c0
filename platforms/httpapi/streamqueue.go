package httpapi

import (
	"errors"
	"time"

	"github.com/inferd/inferd/platforms/serve"
)

// streamWriteTimeout bounds one write of a /generate_stream event: a
// client that takes none of it for so long has stopped reading.
const streamWriteTimeout = 30 * time.Second

// streamEvent is one SSE event's JSON object and, for a stream's first
// event, the status it sets.
type streamEvent struct {
	obj    []byte
	status int
}

// streamQueue is a /generate_stream's outbox: the model's sends queue
// their events without waiting, and the handler's goroutine writes them.
// Once the stream fails (the queue overflowed, or a write failed) every
// put fails too, the request is cancelled, and a write blocked on the
// client is ended at once by an expired write deadline.
type streamQueue struct {
	*serve.Outbox[streamEvent]
	setDeadline func(time.Time) // the connection's write deadline
}

// newStreamQueue returns the queue of a stream whose connection's write
// deadline setDeadline sets and whose request cancel ends.
func newStreamQueue(setDeadline func(time.Time), cancel func(error)) *streamQueue {
	return &streamQueue{setDeadline: setDeadline,
		Outbox: serve.NewOutbox[streamEvent](serve.StreamQueueItems, serve.StreamQueueBytes, func(err error) {
			setDeadline(time.Now())
			cancel(err)
		})}
}

// put queues ev without waiting; the event that does not fit fails the
// stream.
func (q *streamQueue) put(ev streamEvent) error {
	err := q.Put(ev, len(ev.obj), false)
	if errors.Is(err, serve.ErrOutboxFull) {
		q.Fail(serve.ErrClientBehind)
		return serve.ErrClientBehind
	}
	return err
}

// arm sets the deadline of the next write, unless the stream has failed
// (under the queue's lock, so a failure's expired deadline is never
// overwritten).
func (q *streamQueue) arm() error {
	return q.Unless(func() { q.setDeadline(time.Now().Add(streamWriteTimeout)) })
}
