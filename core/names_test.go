package core

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Loads and unloads of names no repository has leave no state, lock or
// memory behind: 100,000 distinct unknown names keep the heap flat.
func TestUnknownNamesLeaveNothing(t *testing.T) {
	s, _, err := startEcho(t, `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`, true, nil)
	must(t, err)
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	const n = 100_000
	before := heap()
	for i := range n {
		name := "unknown-" + strconv.Itoa(i)
		if err := s.Load(ctx, name, nil); CodeOf(err) != CodeInternal {
			t.Fatalf("load %s = %v, want the INTERNAL 'failed to poll' error", name, err)
		}
		if err := s.Unload(ctx, name+"-u"); err != nil {
			t.Fatalf("unload of an unknown name = %v, want a no-op", err)
		}
	}
	after := heap()
	s.mu.RLock()
	models := len(s.models)
	s.mu.RUnlock()
	s.loadMu.Lock()
	locks := len(s.loads)
	s.loadMu.Unlock()
	if models != 1 || locks != 0 {
		t.Fatalf("after %d unknown names: %d model states (want only m's), %d name locks (want 0)", n, models, locks)
	}
	// A leak of even one small map entry per name would be several MiB.
	if grew := int64(after) - int64(before); grew > 1<<20 {
		t.Fatalf("heap in use grew by %d bytes over %d unknown names", grew, n)
	}
}

// An unload whose wait for in-flight requests is cut short leaves the
// version UNLOADING until the close really finishes; only then is it
// UNAVAILABLE "unloaded".
func TestUnloadDeadlineKeepsUnloading(t *testing.T) {
	s, b, a := busy(t, "max_batch_size: 4\n"+`input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]`, 1)
	state := func() (State, string) {
		idx, err := s.Index(context.Background(), false)
		must(t, err)
		for _, e := range idx {
			if e.Name == "m" && e.Version == 1 {
				return e.State, e.Reason
			}
		}
		t.Fatalf("m/1 missing from the index: %+v", idx)
		return 0, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Unload(ctx, "m"); err == nil {
		t.Fatal("unload with a request in flight and a 50 ms deadline succeeded")
	}
	if st, _ := state(); st != StateUnloading {
		t.Fatalf("after the unload's deadline: %v, want UNLOADING while the request runs", st)
	}
	b.gate <- struct{}{} // the in-flight request finishes
	if r := a.wait(0); r.err != nil {
		t.Fatalf("in-flight request: %v", r.err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, reason := state()
		if st == StateUnavailable && reason == "unloaded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the close: %v %q, want UNAVAILABLE unloaded", st, reason)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
