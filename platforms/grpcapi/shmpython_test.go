package grpcapi

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
)

// TestSharedMemoryPythonOutputInPlaceGRPC: a Python model's output that
// comes back through the worker's arena is copied once, straight into the
// client's output region (core/python, core.ExecRequest.Into), and the
// frontend then skips its own copy. The proof is a count: the calls
// allocate far less than one output's worth of bytes each, where a copy
// out of the arena into Go memory costs a whole output per call. The
// input is read from its region into the arena (one copy), so the request
// carries no tensor bytes either.
func TestSharedMemoryPythonOutputInPlaceGRPC(t *testing.T) {
	h, regions := inPlaceHarness(t)
	const elems, calls = 1 << 19, 8 // 2 MiB per output
	data := make([]byte, 4*elems)
	for i := range data {
		data[i] = byte(i*13 + 1)
	}
	shape := []int64{elems}
	shmtest.Region(t, regions, "in", data)
	outKey := shmtest.Region(t, regions, "out", make([]byte, len(data)))
	call := func() {
		t.Helper()
		resp, err := h.client.ModelInfer(ctx(t), inPlaceRequest("identity_py", shape, data, "in", "out", 0, len(data)))
		servertest.Must(t, err)
		if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 0 {
			t.Fatalf("%d raw outputs, the first of %d bytes", len(resp.RawOutputContents), len(resp.RawOutputContents[0]))
		}
	}
	call() // the worker's first execution warms up
	if !bytes.Equal(shmtest.Read(t, outKey), data) {
		t.Fatal("region out does not hold OUTPUT0")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		call()
	}
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(calls*len(data)/2); got > limit {
		t.Fatalf("%d calls allocated %d bytes, over %d: the output is still copied into Go memory", calls, got, limit)
	} else {
		t.Logf("%d calls allocated %d bytes", calls, got)
	}
	if !bytes.Equal(shmtest.Read(t, outKey), data) {
		t.Fatal("region out does not hold OUTPUT0 after the calls")
	}
}
