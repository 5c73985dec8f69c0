package serve

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/inferd/inferd/core/status"
)

// Bounds of an Outbox as the frontends use them: a stream's responses
// the model has produced and the client has not yet taken. They absorb a
// model that produces faster than a reading client takes, and end a
// stream whose client has stopped reading, without ever making the
// model's send wait.
const (
	StreamQueueItems = 1 << 16
	StreamQueueBytes = 32 << 20
	// ConnQueueBytes bounds the bytes all the streams of one client
	// connection hold together (a Budget), which the bounds of each
	// stream leave unbounded as a client opens more streams.
	ConnQueueBytes = 2 * StreamQueueBytes
)

// ErrOutboxFull refuses an item that would take an Outbox past its bounds.
var ErrOutboxFull = errors.New("the stream's queue is full")

// ErrClientBehind ends a stream (or a decoupled request on it) whose client
// does not take the responses as fast as the model produces them: its
// outbox is full. Both frontends answer with it.
var ErrClientBehind = status.Errorf(status.CodeUnavailable, "the client is not reading the stream: more than %d responses or %d bytes are waiting to be written", StreamQueueItems, StreamQueueBytes)

// Outbox carries one stream's items from producers that must never wait
// (a model's sends, on a Python worker's goroutines or an instance's) to
// the one goroutine that writes them to the client. It holds at most
// maxItems items and maxBytes bytes (one item of any size always fits).
// Once failed, every Put fails with the cause.
type Outbox[T any] struct {
	maxItems, maxBytes int
	wake               chan struct{}

	mu     sync.Mutex
	items  []T
	bytes  int
	err    error
	closed bool
	onFail func(error)
	budget *Budget // shared with the other streams of a connection; nil: none
}

// Budget bounds the bytes that several outboxes hold together. Its zero
// value holds nothing; a nil *Budget bounds nothing.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Used is the bytes the outboxes sharing b hold now.
func (b *Budget) Used() int64 { return b.used.Load() }

// take counts n more bytes, unless that passes the budget and force is
// not set.
func (b *Budget) take(n int, force bool) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > b.max && !force {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// give returns n bytes to the budget.
func (b *Budget) give(n int) {
	if b != nil && n != 0 {
		b.used.Add(-int64(n))
	}
}

// NewOutbox returns an empty outbox. onFail, when not nil, is called once,
// under the outbox's lock, when it fails, unless it was closed before.
func NewOutbox[T any](maxItems, maxBytes int, onFail func(error)) *Outbox[T] {
	return &Outbox[T]{maxItems: maxItems, maxBytes: maxBytes, wake: make(chan struct{}, 1), onFail: onFail}
}

// Share makes o count what it holds against b too, and returns o; call it
// before the first Put.
func (o *Outbox[T]) Share(b *Budget) *Outbox[T] {
	o.budget = b
	return o
}

// Put queues v, of size bytes, without waiting. It returns the outbox's
// failure, or ErrOutboxFull when v does not fit; force queues v whatever
// the bounds (an item that ends a request, of which there are few).
func (o *Outbox[T]) Put(v T, size int, force bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if !force && len(o.items) > 0 && (len(o.items) >= o.maxItems || o.bytes+size > o.maxBytes) {
		return ErrOutboxFull
	}
	if !o.budget.take(size, force || len(o.items) == 0) {
		return ErrOutboxFull
	}
	o.items = append(o.items, v)
	o.bytes += size
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// Wake is signalled after items are queued.
func (o *Outbox[T]) Wake() <-chan struct{} { return o.wake }

// Take returns the queued items, oldest first, and empties the outbox.
func (o *Outbox[T]) Take() []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	items := o.items
	o.budget.give(o.bytes)
	o.items, o.bytes = nil, 0
	return items
}

// Fail fails the outbox with err, unless it has failed already, and drops
// what it holds.
func (o *Outbox[T]) Fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	o.budget.give(o.bytes)
	o.err, o.items, o.bytes = err, nil, 0
	if o.onFail != nil && !o.closed {
		o.onFail(err)
	}
}

// Err is why the outbox failed, or nil.
func (o *Outbox[T]) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Unless runs f under the outbox's lock unless it has failed, and returns
// the failure otherwise: what f does cannot interleave with onFail.
func (o *Outbox[T]) Unless(f func()) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	f()
	return nil
}

// Close tells the outbox its writer is gone: a later failure no longer
// calls onFail.
func (o *Outbox[T]) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
}
