package onnxrt

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// TestExecuteInto: an output with a destination (core.ConcatBatch.Into) is
// written there, whether ORT writes it in place (shape known before the
// run) or the raw run copies it from ORT's allocation (shape known after),
// and the result is a prefix of the destination. A destination too small,
// one overlapping an input, and a small output the instance caches are
// left alone: the result is in memory of the backend's own, correct.
func TestExecuteInto(t *testing.T) {
	const n = 1 << 15 // 128 KiB of FP32: above the small-tensor cache
	fixed := load(t, version(t, "fixed", ob.Must(ob.Identity(ob.Float, n))), config(t, ioConfig(0, ob.Float, "[ 32768 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	dynamic := load(t, version(t, "dynamic", ob.Must(ob.Identity(ob.Float, -1))), config(t, ioConfig(0, ob.Float, "[ -1 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	small := load(t, version(t, "small", ob.Must(ob.Identity(ob.Float, 4))), config(t, ioConfig(0, ob.Float, "[ 4 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = byte(i * 13)
	}
	input := func(size int) *core.Tensor {
		return &core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{int64(size / 4)}, Data: data[:size:size]}
	}
	tests := []struct {
		name    string
		inst    core.BatchInstance
		in      *core.Tensor
		into    []byte
		direct  bool
		overlap bool
	}{
		{"known shape", fixed, input(4 * n), make([]byte, 4*n+100), true, false},
		{"unknown shape", dynamic, input(4 * n), make([]byte, 4*n), true, false},
		{"unknown shape, small", dynamic, input(64), make([]byte, 64), true, false},
		{"known shape, too small", fixed, input(4 * n), make([]byte, 4*n-4), false, false},
		{"unknown shape, too small", dynamic, input(4 * n), make([]byte, 16), false, false},
		{"cached", small, input(16), make([]byte, 16), false, false},
		{"overlapping the input", dynamic, input(4 * n), data, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &core.ConcatBatch{Inputs: []*core.Tensor{tc.in}, Outputs: []string{"OUTPUT0"}, Into: [][]byte{tc.into}}
			if err := tc.inst.Execute(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			got := b.Results[0]
			if !bytes.Equal(got.Data, tc.in.Data) || !equalShape(got.Shape, tc.in.Shape) {
				t.Fatalf("result of %d bytes, shape %v: differs from the input", len(got.Data), got.Shape)
			}
			if aliased := unsafe.SliceData(got.Data) == unsafe.SliceData(tc.into); aliased != tc.direct {
				t.Fatalf("result in the destination: %v, want %v", aliased, tc.direct)
			}
			if !tc.direct && !tc.overlap && !bytes.Equal(tc.into, make([]byte, len(tc.into))) {
				t.Fatal("a destination not used was written")
			}
		})
	}
	// Without destinations, as before.
	res := execute(t, dynamic, []string{"OUTPUT0"}, input(4*n))
	if !bytes.Equal(res[0].Data, data) {
		t.Fatal("without a destination: result differs")
	}
}
