package python_test

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestIdleWorkerSleeps: a worker that has just served requests back to
// back (so it polls its socket for a moment after each reply, and the
// server's reader for each answer) goes back to sleep once they stop:
// over the idle second that follows neither side uses measurable CPU.
//
// Both sides poll for at most 200 µs of wall time after a reply, so the
// test waits a whole second before measuring, which covers a busy machine
// not scheduling a side for a while. It counts the CPU of this test's own
// worker only (a process another test's engine starts meanwhile is not
// it), and collects garbage first so that a collection of the requests'
// garbage does not land in the idle second.
func TestIdleWorkerSleeps(t *testing.T) {
	before := childPIDs()
	e := start(t, options{}, "identity")
	r := newIdentityRequest()
	for range 300 {
		if _, err := e.infer(r); err != nil {
			t.Fatal(err)
		}
	}
	var ours []string
	for _, pid := range childPIDs() {
		if !slices.Contains(before, pid) {
			ours = append(ours, pid)
		}
	}
	if len(ours) == 0 {
		t.Fatal("found no worker process of this test's engine")
	}
	runtime.GC()
	time.Sleep(time.Second) // far past the last bounded poll
	worker, server := cpuOf(ours), selfCPU()
	time.Sleep(time.Second)
	// A side that kept polling would use most of a core; one that sleeps
	// uses nothing measurable (the clock counts in 10 ms ticks).
	if used := time.Duration(cpuOf(ours) - worker); used > 100*time.Millisecond {
		t.Errorf("the idle worker used %v of CPU in one second", used)
	}
	if used := time.Duration(selfCPU() - server); used > 100*time.Millisecond {
		t.Errorf("the idle server used %v of CPU in one second", used)
	}
}
