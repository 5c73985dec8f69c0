package sequence_test

import (
	"testing"

	"github.com/inferd/inferd/core"
)

// TestRunningGaugeSequenceFiller checks that a direct sequence batcher's
// not-ready filler rows do not count: a sequence in slot 1 runs with a
// filler in slot 0, and only its own request is running.
func TestRunningGaugeSequenceFiller(t *testing.T) {
	b := &accBackend{gated: true}
	s, err := accServer(t, b, "max_batch_size: 4\n"+oneInstance+accIO+"sequence_batching { "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	first := gatedSend(t, s, 1, core.FlagSequenceStart|core.FlagSequenceEnd, 1)
	if rows := nextRows(t, b); rows != 1 {
		t.Fatalf("first execution has %d rows, want 1", rows)
	}
	second := gatedSend(t, s, 2, core.FlagSequenceStart, 2) // slot 1: slot 0 is still sequence 1's
	waitPending(t, s, 1)
	if st := stats(t, s); st.Running != 1 {
		t.Fatalf("first execution: running %d, want 1", st.Running)
	}
	b.gate <- struct{}{}
	if rows := nextRows(t, b); rows != 2 {
		t.Fatalf("second execution has %d rows, want 2 (a filler in slot 0)", rows)
	}
	if st := stats(t, s); st.Running != 1 || st.Pending != 0 {
		t.Fatalf("second execution: running %d, pending %d; want 1, 0", st.Running, st.Pending)
	}
	b.gate <- struct{}{}
	for i, ch := range []chan seqResult{first, second} {
		if r := <-ch; r.err != nil || r.y != int32(i+1) {
			t.Fatalf("sequence %d: y = %d, %v; want %d", i+1, r.y, r.err, i+1)
		}
	}
	if st := stats(t, s); st.Running != 0 {
		t.Fatalf("all answered: running %d, want 0", st.Running)
	}
}
