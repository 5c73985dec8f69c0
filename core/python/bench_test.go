package python_test

import (
	"testing"

	"github.com/inferd/inferd/core"
)

// BenchmarkRoundTrip is one identity request through the core to a
// worker and back, without a frontend: the Python backend's own cost
// per request (BENCHMARKS.md "Python backend").
func BenchmarkRoundTrip(b *testing.B) {
	e := start(b, options{}, "identity")
	req := func() *core.InferRequest {
		return &core.InferRequest{ModelName: "identity", Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 16}, make([]float32, 16)...)}}
	}
	if _, err := e.infer(req()); err != nil {
		b.Fatal(err)
	}
	b.Run("c1", func(b *testing.B) {
		r := req()
		for b.Loop() {
			if _, err := e.infer(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c8", func(b *testing.B) {
		b.SetParallelism(4) // 4 × GOMAXPROCS(2)
		b.RunParallel(func(pb *testing.PB) {
			r := req()
			for pb.Next() {
				if _, err := e.infer(r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
