package trace

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// TestChildAfterFinish: a child that a Python model's background thread
// (an async BLS call) or a decoupled model after its final response opens,
// begins and ends while or after the client's trace is finished neither
// races with Finish (go test -race) nor lands in the written trace.
func TestChildAfterFinish(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = filepath.Join(t.TempDir(), "t.json"), LevelTimestamps|LevelTensors, 1
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		r := m.Start("bls", nil)
		now := time.Now()
		c := r.Core()
		c.Begin("bls", 1, "", now, now, nil)
		early := c.Child() // opened before the response, ends after Finish
		early.Begin("late", 1, "", now, now, nil)
		c.End(core.TraceTimes{RequestEnd: now}, nil)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 20 {
				early.Output([]*core.Tensor{{Name: "OUT", DataType: core.TypeInt32, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}}})
				early.End(core.TraceTimes{ComputeStart: now, ComputeInputEnd: now, ComputeOutputStart: now, ComputeEnd: now, RequestEnd: now}, nil)
				late := c.Child()
				late.Begin("late", 1, "", now, now, nil)
				late.End(core.TraceTimes{RequestEnd: now}, nil)
			}
		})
		wg.Go(func() {
			r.Stamp("HTTP_SEND_START", now)
			r.Finish()
		})
		wg.Wait()
		// After Finish, whatever a straggler records is dropped.
		c.Child().Begin("late", 1, "", now, now, nil)
		r.Stamp("HTTP_SEND_END", now)
		r.Finish() // a second Finish writes nothing more
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := traces(readRecords(t, cfg.File)); n != 50 {
		t.Fatalf("%d client traces in the file, want 50", n)
	}
	for _, rec := range readRecords(t, cfg.File) {
		if ts, ok := rec["timestamps"].([]any); ok && ts[0].(map[string]any)["name"] == "HTTP_SEND_END" {
			t.Fatalf("a stamp after Finish was written: %v", rec)
		}
	}
}

// TestFinishAfterClose: a trace that finishes after the server stopped
// (a straggling request) neither truncates the completed trace file nor
// writes an indexed one; it is dropped and counted.
func TestFinishAfterClose(t *testing.T) {
	for _, logFreq := range []uint32{0, 1} {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.File, cfg.Level, cfg.Rate, cfg.LogFrequency = filepath.Join(dir, "t.json"), LevelTimestamps, 1, logFreq
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		request(m, "m")
		straggler := m.Start("m", nil)
		straggler.Core().Begin("m", 1, "", time.Now(), time.Now(), nil)
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		name := cfg.File
		if logFreq != 0 {
			name += ".0"
		}
		before := readRecords(t, name)
		straggler.Finish()
		if after := readRecords(t, name); len(after) != len(before) || traces(after) != 1 {
			t.Fatalf("log frequency %d: %s holds %d records after a late Finish, %d before", logFreq, name, len(after), len(before))
		}
		if _, err := os.Stat(cfg.File + ".1"); !os.IsNotExist(err) {
			t.Fatalf("log frequency %d: an indexed file written after close: %v", logFreq, err)
		}
		if d := m.files[cfg.File].droppedCount(); d != 1 {
			t.Fatalf("log frequency %d: %d dropped saves, want 1", logFreq, d)
		}
	}
}

// TestRefusedUpdate: an update that is refused, for the global setting
// (a model that follows its level would then trace at rate 0) or for a
// model, changes nothing: neither the settings the API shows nor which
// models follow the global setting.
func TestRefusedUpdate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File, cfg.Rate = filepath.Join(t.TempDir(), "t.json"), 10
	m := newManager(t, cfg)
	if err := m.Update("a", Update{Rate: ptr[uint32](0)}); err != nil { // OFF, so allowed
		t.Fatal(err)
	}
	if err := m.Update("b", Update{Count: ptr[int32](5)}); err != nil {
		t.Fatal(err)
	}
	models := []string{"", "a", "b", "c"}
	before := map[string]Settings{}
	for _, name := range models {
		before[name] = m.Settings(name)
	}
	fallback := maps.Clone(m.fallback)
	for _, tc := range []struct {
		model string
		u     Update
	}{
		{"", Update{Level: ptr(LevelTimestamps)}},
		{"c", Update{Level: ptr(LevelTimestamps), Rate: ptr[uint32](0)}},
		{"b", Update{Level: ptr(LevelTimestamps), Count: ptr[int32](0)}},
	} {
		if err := m.Update(tc.model, tc.u); err == nil {
			t.Fatalf("%q %+v: accepted", tc.model, tc.u)
		}
		for _, name := range models {
			if got := m.Settings(name); !reflect.DeepEqual(got, before[name]) {
				t.Fatalf("after the refused %q update, %q shows %+v, was %+v", tc.model, name, got, before[name])
			}
		}
		if !maps.Equal(m.fallback, fallback) {
			t.Fatalf("after the refused %q update, the models following the global setting are %v, were %v", tc.model, m.fallback, fallback)
		}
	}
}
