package python_test

import (
	"testing"
	"time"
)

// TestIdleWorkerSleeps: a worker that has just served requests back to
// back (so it polls its socket for a moment after each reply) goes back
// to sleep once they stop: over the idle second that follows it uses
// almost no CPU.
func TestIdleWorkerSleeps(t *testing.T) {
	e := start(t, options{}, "identity")
	r := newIdentityRequest()
	for range 300 {
		if _, err := e.infer(r); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // at most one bounded poll after the last reply
	before := workersCPU()
	time.Sleep(time.Second)
	// A worker that kept polling would use most of a core; one that sleeps
	// uses nothing measurable (the clock counts in 10 ms ticks).
	if used := time.Duration(workersCPU() - before); used > 100*time.Millisecond {
		t.Fatalf("the idle worker used %v of CPU in one second", used)
	}
}
