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
