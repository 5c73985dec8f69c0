package core

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/inferd/inferd/core/padbatch"
)

// BenchmarkGatherScatter measures building one execution from R requests
// of one FP32 row each and cutting the output back per request:
//
//	go test ./core -run '^$' -bench GatherScatter -benchmem
func BenchmarkGatherScatter(b *testing.B) {
	for _, r := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("requests=%d", r), func(b *testing.B) {
			const width = 256
			reqs := make([]*ExecRequest, r)
			for i := range reqs {
				reqs[i] = &ExecRequest{BatchSize: 1,
					Inputs:  []*Tensor{{Name: "x", DataType: TypeFP32, Shape: []int64{1, width}, Data: make([]byte, 4*width)}},
					Outputs: []string{"y"},
				}
				reqs[i].batch = ConcatBatch{Inputs: reqs[i].Inputs, Outputs: reqs[i].Outputs}
			}
			var plan gatherPlan
			b.ReportAllocs()
			for b.Loop() {
				batch, err := plan.gather(reqs)
				if err != nil {
					b.Fatal(err)
				}
				in := batch.Inputs[0]
				batch.Results = []*Tensor{{Name: "y", DataType: in.DataType, Shape: in.Shape, Data: in.Data}}
				plan.scatter(batch, reqs)
			}
		})
	}
}

// BenchmarkGatherPadded is BenchmarkGatherScatter for a padded batch
// (core/padbatch): R requests of one INT64 row each, of lengths 8 to 15,
// padded to the longest; it allocates as the plain concatenation does:
//
//	go test ./core -run '^$' -bench GatherPadded -benchmem
func BenchmarkGatherPadded(b *testing.B) {
	for _, r := range []int{8, 32} {
		b.Run(fmt.Sprintf("requests=%d", r), func(b *testing.B) {
			reqs := make([]*ExecRequest, r)
			for i := range reqs {
				w := int64(8 + i%8)
				reqs[i] = &ExecRequest{BatchSize: 1,
					Inputs:  []*Tensor{{Name: "ids", DataType: TypeInt64, Shape: []int64{1, w}, Data: make([]byte, 8*w)}},
					Outputs: []string{"y"},
				}
			}
			plan := gatherPlan{pad: &padbatch.Spec{Pad: map[string]int64{"ids": 0}}}
			b.ReportAllocs()
			for b.Loop() {
				batch, err := plan.gather(reqs)
				if err != nil {
					b.Fatal(err)
				}
				in := batch.Inputs[0]
				batch.Results = []*Tensor{{Name: "y", DataType: in.DataType, Shape: in.Shape, Data: in.Data}}
				plan.scatter(batch, reqs)
			}
		})
	}
}

// BenchmarkSchedulerRoundTrip measures a request's trip through the
// scheduler to an instance that returns at once, with and without dynamic
// batching, at 1 and 16 concurrent callers:
//
//	go test ./core -run '^$' -bench SchedulerRoundTrip -benchmem
func BenchmarkSchedulerRoundTrip(b *testing.B) {
	for _, tc := range []struct{ name, cfg string }{
		{"default", ""},
		{"dynamic", "dynamic_batching {}\n"},
	} {
		for _, conc := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/c%d", tc.name, conc), func(b *testing.B) {
				mv := echoVersion(b, tc.cfg+"instance_group [ { kind: KIND_CPU count: 2 } ]\n")
				b.ReportAllocs()
				var wg sync.WaitGroup
				per := b.N/conc + 1
				b.ResetTimer()
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							if _, err := mv.Infer(context.Background(), batchReq(1, 1, 16)); err != nil {
								panic(err)
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkQueueDelay reports how long a lone request waits with
// max_queue_delay_microseconds: 200 on an idle server (queue-µs); the
// runtime's own timers would make it about 1000:
//
//	go test ./core -run '^$' -bench QueueDelay
func BenchmarkQueueDelay(b *testing.B) {
	mv := echoVersion(b, "dynamic_batching { max_queue_delay_microseconds: 200 }\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n")
	before := mv.Stats.Snapshot()
	for b.Loop() {
		if _, err := mv.Infer(context.Background(), batchReq(1, 1, 16)); err != nil {
			b.Fatal(err)
		}
	}
	after := mv.Stats.Snapshot()
	b.ReportMetric(float64(after.QueueUs-before.QueueUs)/float64(after.Queue.Count-before.Queue.Count), "queue-µs")
}

// echoVersion serves an open echo model over INT32 [16] rows (max batch 8)
// with the given extra config lines and returns its version.
func echoVersion(b *testing.B, extra string) *ModelVersion {
	s, _, err := startEcho(b, `max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 16 ] } ]
`+extra, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	return mv
}
