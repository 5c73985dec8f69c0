package httpapi

import (
	"errors"
	"testing"
	"time"

	"github.com/inferd/inferd/platforms/serve"
)

// TestStreamQueue: puts never wait; the queue holds at most
// serve.StreamQueueItems events or serve.StreamQueueBytes bytes (one event of any
// size always fits); the put that overflows fails the stream, which ends
// a blocked write at once (an expired write deadline) and cancels the
// request; later puts and writes fail, and a failure after the handler
// is done leaves its connection alone (the handler's return cancels the
// request).
func TestStreamQueue(t *testing.T) {
	type call struct {
		deadline time.Time
		cancel   error
	}
	var calls []call
	newQueue := func() *streamQueue {
		calls = nil
		return newStreamQueue(func(d time.Time) { calls = append(calls, call{deadline: d}) },
			func(err error) { calls = append(calls, call{cancel: err}) })
	}
	big := streamEvent{obj: make([]byte, serve.StreamQueueBytes+1)}
	small := streamEvent{obj: []byte(`{}`)}
	for _, tc := range []struct {
		name  string
		fill  []streamEvent
		extra streamEvent
	}{
		{"events", func() []streamEvent {
			evs := make([]streamEvent, serve.StreamQueueItems)
			for i := range evs {
				evs[i] = small
			}
			return evs
		}(), small},
		{"bytes", []streamEvent{{obj: make([]byte, serve.StreamQueueBytes-1)}}, streamEvent{obj: []byte("ab")}},
		{"one big event fits, not two", []streamEvent{big}, small},
	} {
		q := newQueue()
		for i, ev := range tc.fill {
			if err := q.put(ev); err != nil {
				t.Fatalf("%s: put %d: %v", tc.name, i, err)
			}
		}
		if len(calls) != 0 {
			t.Fatalf("%s: the connection touched before any write: %v", tc.name, calls)
		}
		before := time.Now()
		if err := q.put(tc.extra); !errors.Is(err, serve.ErrClientBehind) {
			t.Fatalf("%s: the put past the bound: %v, want serve.ErrClientBehind", tc.name, err)
		}
		if len(calls) != 2 || calls[0].deadline.IsZero() || calls[0].deadline.After(time.Now()) || calls[0].deadline.Before(before) || !errors.Is(calls[1].cancel, serve.ErrClientBehind) {
			t.Fatalf("%s: the failure did %+v, want an expired write deadline, then the request cancelled", tc.name, calls)
		}
		if len(q.Take()) != 0 || q.put(small) == nil || q.arm() == nil || q.Err() == nil {
			t.Fatalf("%s: the failed stream still queues or writes", tc.name)
		}
	}

	// A write is armed with streamWriteTimeout from now.
	q := newQueue()
	if err := q.arm(); err != nil || len(calls) != 1 {
		t.Fatalf("arm: %v, %+v", err, calls)
	}
	if d := time.Until(calls[0].deadline); d > streamWriteTimeout || d < streamWriteTimeout-5*time.Second {
		t.Fatalf("arm: a write deadline %v from now, want %v", d, streamWriteTimeout)
	}
	// After close the connection is no longer the queue's.
	q = newQueue()
	q.Close()
	q.Fail(errors.New("late"))
	if len(calls) != 0 {
		t.Fatalf("a failure after close did %+v, want nothing", calls)
	}
}
