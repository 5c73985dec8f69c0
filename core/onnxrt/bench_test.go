package onnxrt

import (
	"context"
	"testing"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// BenchmarkExecuteSimple runs Triton's quickstart "simple" model (AddSub
// INT32, [1,16]) through one instance.
func BenchmarkExecuteSimple(b *testing.B) {
	v := version(b, "simple", ob.Must(ob.AddSub(ob.Int32, -1, 16)))
	in := load(b, v, config(b, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})))
	x := tensor(b, "INPUT0", ob.Int32, []int64{1, 16}, make([]float64, 16))
	y := tensor(b, "INPUT1", ob.Int32, []int64{1, 16}, make([]float64, 16))
	outputs := []string{"OUTPUT0", "OUTPUT1"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		batch := core.ConcatBatch{Inputs: []*core.Tensor{x, y}, Outputs: outputs}
		if err := in.Execute(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
}
