package serve

import (
	"errors"
	"testing"
)

// TestOutbox: a put never waits; past the bounds it is refused with
// ErrOutboxFull, which leaves the outbox working (one item of any size
// fits, and a forced one always does); Take empties it in order; a
// failure refuses every later put and calls onFail once, unless the
// outbox was closed.
func TestOutbox(t *testing.T) {
	var failures []error
	o := NewOutbox[int](3, 10, func(err error) { failures = append(failures, err) })
	for i, tc := range []struct {
		size  int
		force bool
		want  error
	}{
		{20, false, nil}, // alone, any size fits
		{1, false, ErrOutboxFull},
		{1, true, nil},
	} {
		if err := o.Put(i, tc.size, tc.force); !errors.Is(err, tc.want) {
			t.Fatalf("put %d: %v, want %v", i, err, tc.want)
		}
	}
	select {
	case <-o.Wake():
	default:
		t.Fatal("no wake-up after a put")
	}
	if got := o.Take(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("took %v, want [0 2]", got)
	}
	for i := range 3 {
		if err := o.Put(i, 1, false); err != nil {
			t.Fatalf("put %d into the emptied outbox: %v", i, err)
		}
	}
	if err := o.Put(3, 1, false); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("a fourth item: %v, want ErrOutboxFull", err)
	}
	if len(failures) != 0 || o.Err() != nil {
		t.Fatal("a full outbox failed")
	}
	boom := errors.New("boom")
	o.Fail(boom)
	o.Fail(errors.New("again"))
	if err := o.Put(9, 1, true); !errors.Is(err, boom) || len(o.Take()) != 0 || len(failures) != 1 || o.Unless(func() { t.Error("ran after the failure") }) == nil {
		t.Fatalf("after the failure: put %v, onFail calls %v", err, failures)
	}

	closed := NewOutbox[int](1, 1, func(error) { t.Error("onFail after Close") })
	closed.Close()
	closed.Fail(boom)
}

// TestOutboxBudget: outboxes sharing a Budget hold no more than it
// together, but for each one's first item (which always fits); what Take
// and Fail drop goes back to it.
func TestOutboxBudget(t *testing.T) {
	b := NewBudget(100)
	x := NewOutbox[int](10, 1000, nil).Share(b)
	y := NewOutbox[int](10, 1000, nil).Share(b)
	steps := []struct {
		o     *Outbox[int]
		size  int
		force bool
		want  error
		used  int64
	}{
		{x, 60, false, nil, 60},
		{x, 50, false, ErrOutboxFull, 60}, // past the budget, not x's own bounds
		{y, 50, false, nil, 110},          // y's first item always fits
		{y, 10, false, ErrOutboxFull, 110},
		{y, 10, true, nil, 120}, // a request's last message is forced in
	}
	for i, s := range steps {
		if err := s.o.Put(i, s.size, s.force); !errors.Is(err, s.want) {
			t.Fatalf("step %d: Put = %v, want %v", i, err, s.want)
		}
		if got := b.Used(); got != s.used {
			t.Fatalf("step %d: budget used %d, want %d", i, got, s.used)
		}
	}
	if got := x.Take(); len(got) != 1 || b.Used() != 60 {
		t.Fatalf("Take: %v, budget used %d, want 1 item and 60", got, b.Used())
	}
	y.Fail(ErrClientBehind)
	if b.Used() != 0 {
		t.Fatalf("after Fail the budget holds %d bytes", b.Used())
	}
	if err := x.Put(0, 100, false); err != nil {
		t.Fatalf("Put into the freed budget: %v", err)
	}
}
