package openai

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Server-sent events as OpenAI streams them: each event one line
// "data: <json>" and a blank line, the stream closed by "data: [DONE]"
// (openai/openai-python src/openai/_streaming.py stops at a data line
// starting with [DONE], and raises APIError for a data object with an
// "error" key).

const (
	// sseMaxQueued bounds the bytes of events waiting for a slow client;
	// past it the stream fails and the model's request is cancelled, so a
	// client that stops reading never holds a model instance.
	sseMaxQueued = 8 << 20
	// sseWriteTimeout bounds each write to the client.
	sseWriteTimeout = 30 * time.Second
)

var (
	errClientBehind = errors.New("the client stopped reading the stream")
	doneEvent       = []byte("[DONE]")
)

// sseQueue carries events from the model's sends, which must never wait
// for the client, to the handler's goroutine, which writes them.
type sseQueue struct {
	mu     sync.Mutex
	events [][]byte
	queued int
	err    error // the stream failed: puts fail with it
	wake   chan struct{}
	cancel context.CancelCauseFunc
}

func newSSEQueue(cancel context.CancelCauseFunc) *sseQueue {
	return &sseQueue{wake: make(chan struct{}, 1), cancel: cancel}
}

// put queues one event (its JSON); it fails once the stream has failed.
func (q *sseQueue) put(ev []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	if q.queued+len(ev) > sseMaxQueued {
		q.failLocked(errClientBehind)
		return q.err
	}
	q.events = append(q.events, ev)
	q.queued += len(ev)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// take removes the queued events.
func (q *sseQueue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.queued = nil, 0
	return evs
}

// fail ends the stream: later puts fail, and the model's request is
// cancelled.
func (q *sseQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failLocked(err)
}

func (q *sseQueue) failLocked(err error) {
	if q.err == nil {
		q.err = err
		q.cancel(err)
	}
}

func (q *sseQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// sseWriter writes events to the client, each within sseWriteTimeout.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     []byte
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// write sends one event, the response's head first.
func (sw *sseWriter) write(ev []byte) error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if !sw.started {
		h := sw.w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // proxies such as nginx must not buffer the stream
		sw.w.WriteHeader(http.StatusOK)
		sw.started = true
	}
	sw.buf = append(append(append(sw.buf[:0], "data: "...), ev...), "\n\n"...)
	if _, err := sw.w.Write(sw.buf); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// end clears the write deadline, so that a kept-alive connection's next
// request does not meet it.
func (sw *sseWriter) end() { _ = sw.rc.SetWriteDeadline(time.Time{}) }

// pump writes q's events as they come until done delivers the run's end
// (its error), and returns that error; a failed write fails q (cancelling
// the run) and pump then waits for the run's end and returns the
// write's error.
func (sw *sseWriter) pump(q *sseQueue, done <-chan error) error {
	writeAll := func() bool {
		for _, ev := range q.take() {
			if err := sw.write(ev); err != nil {
				q.fail(err)
				return false
			}
		}
		return true
	}
	for {
		if !writeAll() {
			<-done
			return q.failed()
		}
		select {
		case <-q.wake:
		case err := <-done:
			if !writeAll() {
				return q.failed()
			}
			if ferr := q.failed(); ferr != nil {
				return ferr
			}
			return err
		}
	}
}
