package onnxrt

import (
	"bytes"
	"testing"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// TestExecuteCache runs one instance through cache hits, misses, evictions
// and tensors too large to cache, and checks that a result keeps its data
// after later runs reuse the cached buffers. Not parallel: it counts the
// package's live ORT values.
func TestExecuteCache(t *testing.T) {
	const width = 1024 // INT32: 4 KiB a row, so batches up to 16 are cached
	live := liveValues.Load()
	v := version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, width)))
	ci := load(t, v, config(t, ioConfig(8, ob.Int32, "1024", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
	in := ci.(*instance)

	run := func(r int, batch int64) []*core.Tensor {
		t.Helper()
		shape := []int64{batch, width}
		a, b := make([]float64, batch*width), make([]float64, batch*width)
		for i := range a {
			a[i], b[i] = float64(r*100+i%50), float64(i%13-r)
		}
		res := execute(t, ci, []string{"OUTPUT1", "OUTPUT0"},
			tensor(t, "INPUT0", ob.Int32, shape, a), tensor(t, "INPUT1", ob.Int32, shape, b))
		diff, sum := decode(t, ob.Int32, res[0]), decode(t, ob.Int32, res[1])
		if len(sum) != len(a) || len(diff) != len(a) {
			t.Fatalf("run %d batch %d: %d and %d values, want %d", r, batch, len(sum), len(diff), len(a))
		}
		for i := range a {
			if sum[i] != a[i]+b[i] || diff[i] != a[i]-b[i] {
				t.Fatalf("run %d batch %d element %d: sum %v diff %v, want %v %v", r, batch, i, sum[i], diff[i], a[i]+b[i], a[i]-b[i])
			}
		}
		for _, t2 := range res {
			if !equalShape(t2.Shape, shape) {
				t.Fatalf("run %d: %s shape %v, want %v", r, t2.Name, t2.Shape, shape)
			}
		}
		return res
	}

	first := run(0, 1)
	want := [][]byte{bytes.Clone(first[0].Data), bytes.Clone(first[1].Data)}
	wantShape := [][]int64{append([]int64{}, first[0].Shape...), append([]int64{}, first[1].Shape...)}
	// Hits and misses; 20 rows (80 KiB) take the uncached path; 2, 4, 5, 6
	// and 7 evict the older shapes, so 1 and 3 come back as misses.
	for r, batch := range []int64{3, 1, 1, 20, 3, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 3, 20, 1} {
		run(r+1, batch)
		if n := len(in.cache.inputs[0]); n > cacheWays {
			t.Fatalf("%d cached shapes, at most %d expected", n, cacheWays)
		}
	}
	for k, r := range first {
		if !bytes.Equal(r.Data, want[k]) || !equalShape(r.Shape, wantShape[k]) {
			t.Errorf("%s of the first run changed by later runs", r.Name)
		}
	}
	if got := in.cache.outputs[0][0].shape; !equalShape(got, []int64{1, width}) {
		t.Errorf("most recent cached output shape %v, want [1 %d]", got, width)
	}

	if liveValues.Load() == live {
		t.Error("no ORT values cached")
	}
	if err := ci.Close(); err != nil {
		t.Fatal(err)
	}
	if n := liveValues.Load(); n != live {
		t.Errorf("%d ORT values live after Close, want %d", n, live)
	}
}

// TestExecuteCacheOutputSubset asks for one output, then both, then the
// other twice: every result is a copy of its own.
func TestExecuteCacheOutputSubset(t *testing.T) {
	t.Parallel()
	v := version(t, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 4)))
	in := load(t, v, config(t, ioConfig(8, ob.Int32, "4", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
	x := tensor(t, "INPUT0", ob.Int32, []int64{1, 4}, []float64{5, 6, 7, 8})
	y := tensor(t, "INPUT1", ob.Int32, []int64{1, 4}, []float64{1, 2, 3, 4})
	want := map[string][]float64{"OUTPUT0": {6, 8, 10, 12}, "OUTPUT1": {4, 4, 4, 4}}
	check := func(outs []string, r *core.Tensor) {
		t.Helper()
		got, w := decode(t, ob.Int32, r), want[r.Name]
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%v: %s = %v, want %v", outs, r.Name, got, w)
			}
		}
	}
	for _, outs := range [][]string{{"OUTPUT0"}, {"OUTPUT0", "OUTPUT1"}, {"OUTPUT1", "OUTPUT1"}} {
		res := execute(t, in, outs, x, y)
		for _, r := range res {
			check(outs, r)
		}
		if len(res) == 2 {
			res[0].Data[0] ^= 0xff // a result's bytes are its own
			check(outs, res[1])
		}
	}
}
