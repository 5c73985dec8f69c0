package python_test

import (
	"testing"
	"time"
)

// TestIdleWorkerSleeps: a worker that has just served requests back to
// back (so it polls its socket for a moment after each reply, and the
// server's reader for each answer) goes back to sleep once they stop:
// over the idle second that follows neither side uses measurable CPU.
func TestIdleWorkerSleeps(t *testing.T) {
	e := start(t, options{}, "identity")
	r := newIdentityRequest()
	for range 300 {
		if _, err := e.infer(r); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // at most one bounded poll after the last reply
	worker, server := workersCPU(), selfCPU()
	time.Sleep(time.Second)
	// A side that kept polling would use most of a core; one that sleeps
	// uses nothing measurable (the clock counts in 10 ms ticks).
	if used := time.Duration(workersCPU() - worker); used > 100*time.Millisecond {
		t.Errorf("the idle worker used %v of CPU in one second", used)
	}
	if used := time.Duration(selfCPU() - server); used > 100*time.Millisecond {
		t.Errorf("the idle server used %v of CPU in one second", used)
	}
}
