package core

import (
	"context"
	"runtime"
	"strconv"
	"testing"
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
