package trace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// bigTrace traces one request whose output is n INT32 elements, about
// 7n bytes of TENSORS record.
func bigTrace(m *Manager, n int) {
	r := m.Start("m", nil)
	if r == nil {
		return
	}
	now := time.Now()
	c := r.Core()
	c.Begin("m", 1, "", now, now, nil)
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = 0x11
	}
	c.Output([]*core.Tensor{{Name: "OUT", DataType: core.TypeInt32, Shape: []int64{int64(n)}, Data: data}})
	c.End(core.TraceTimes{RequestEnd: now}, nil)
	r.Finish()
}

// TestBufferedTracesCapped: without a log frequency, Triton keeps every
// trace in memory until the setting ends (an update, or the server's
// stop), which grows without bound with an unlimited count. Past
// maxBufferedTraceBytes the traces go to the trace file early instead,
// in order, so the completed file holds exactly what it would have.
func TestBufferedTracesCapped(t *testing.T) {
	for _, count := range []int32{-1, 1000} {
		cfg := DefaultConfig()
		cfg.File, cfg.Level, cfg.Rate, cfg.Count = filepath.Join(t.TempDir(), "t.json"), LevelTimestamps|LevelTensors, 1, count
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		// About 40 MiB of records: more than twice the cap.
		const traced, elems = 64, 1 << 16
		for range traced {
			bigTrace(m, elems)
		}
		st := m.snap.Load().global
		st.mu.Lock()
		held := len(st.buf)
		st.mu.Unlock()
		if held > maxBufferedTraceBytes {
			t.Errorf("count %d: %d bytes of traces held, more than the cap of %d", count, held, maxBufferedTraceBytes)
		}
		if fi, err := os.Stat(cfg.File); err != nil || fi.Size() < maxBufferedTraceBytes {
			t.Errorf("count %d: the trace file before the stop: %v (%v), want the traces past the cap", count, fi, err)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := traces(readRecords(t, cfg.File)); n != traced {
			t.Fatalf("count %d: %d traces in the file, want %d", count, n, traced)
		}
		if _, err := os.Stat(cfg.File + ".0"); !os.IsNotExist(err) {
			t.Errorf("count %d: an indexed file without a log frequency: %v", count, err)
		}
	}
}

// TestTraceTensorsCapped: one traced request of a decoupled model that
// sends response after response holds at most maxTraceTensorBytes of
// TENSORS records; past it they are dropped, while its timestamps are
// all kept.
func TestTraceTensorsCapped(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = filepath.Join(t.TempDir(), "t.json"), LevelTimestamps|LevelTensors, 1
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Start("stream", nil)
	now := time.Now()
	c := r.Core()
	c.Begin("stream", 1, "", now, now, nil)
	// 40 responses of about 650 KB of record each: 26 MB.
	const responses, elems = 40, 1 << 16
	data := make([]byte, 4*elems)
	for i := range data {
		data[i] = 0x11
	}
	for range responses {
		c.Output([]*core.Tensor{{Name: "OUT", DataType: core.TypeInt32, Shape: []int64{elems}, Data: data}})
	}
	c.End(core.TraceTimes{RequestEnd: now}, nil)
	r.Finish()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	outputs, ended, size := 0, false, 0
	for _, rec := range readRecords(t, cfg.File) {
		if tensor, ok := rec["tensor"].(map[string]any); ok {
			outputs++
			size += len(tensor["data"].(string))
		}
		if ts, ok := rec["timestamps"].([]any); ok && ts[0].(map[string]any)["name"] == "REQUEST_END" {
			ended = true
		}
	}
	if outputs == 0 || outputs >= responses || size > maxTraceTensorBytes {
		t.Errorf("%d of %d output records kept (%d bytes of data), want some, within %d bytes", outputs, responses, size, maxTraceTensorBytes)
	}
	if !ended {
		t.Error("the REQUEST_END timestamp past the cap was dropped")
	}
}
