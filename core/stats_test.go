package core

import (
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestStatsShardsSumExactly records from many goroutines into a sharded
// Stats and a zero one and wants every counter exact: the shards a
// request lands in must never lose or double a count.
func TestStatsShardsSumExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stats *Stats
	}{
		{"zero", &Stats{}},
		{"one shard", &Stats{shards: make([]statsShard, 1)}},
		{"eight shards", &Stats{shards: make([]statsShard, 8), mask: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.stats
			const workers, each = 8, 500
			t0 := time.Unix(1000, 0)
			times := requestTimes{req: t0, queue: t0.Add(1 * time.Microsecond), exec: t0.Add(3 * time.Microsecond),
				cin: t0.Add(6 * time.Microsecond), cout: t0.Add(10 * time.Microsecond), execEnd: t0.Add(15 * time.Microsecond)}
			end := t0.Add(21 * time.Microsecond)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						bs := uint64(1 + (w+i)%3)
						s.recordExecution(bs, 1000, 2000, 3000)
						s.recordSuccess(times, end, bs)
						j := &Job{state: jobTaken}
						s.startRunning([]*Job{j})
						s.EndRunning(j)
						if i%10 == 0 {
							s.recordFailure(t0, end, FailBackend)
						}
					}
				})
			}
			wg.Wait()
			got := s.Snapshot()
			n := uint64(workers * each)
			if got.ExecutionCount != n || got.Success.Count != n || got.Success.Ns != n*21000 || got.RequestUs != n*21 {
				t.Errorf("executions %d, successes %d (%d ns, %d µs), want %d (%d ns, %d µs)",
					got.ExecutionCount, got.Success.Count, got.Success.Ns, got.RequestUs, n, n*21000, n*21)
			}
			if got.Queue.Ns != n*2000 || got.ComputeInfer.Ns != n*4000 || got.ComputeOutputUs != n*5 {
				t.Errorf("queue %d ns, infer %d ns, output %d µs", got.Queue.Ns, got.ComputeInfer.Ns, got.ComputeOutputUs)
			}
			if want := uint64(workers * each / 10); got.Fail.Count != want || got.Failures[FailBackend] != want {
				t.Errorf("failures %d (%v), want %d", got.Fail.Count, got.Failures, want)
			}
			if got.LastInference != end.UnixMilli() || got.Running != 0 {
				t.Errorf("last inference %d, running %d", got.LastInference, got.Running)
			}
			var execs, infers uint64
			for i, b := range got.Batches {
				if b.BatchSize != uint64(i+1) || b.ComputeInput.Ns != b.ComputeInput.Count*1000 {
					t.Errorf("batch row %d: %+v", i, b)
				}
				execs += b.ComputeInfer.Count
				infers += b.BatchSize * b.ComputeInfer.Count
			}
			if len(got.Batches) != 3 || execs != n || infers != got.InferenceCount {
				t.Errorf("%d batch rows, %d executions, %d inferences (counted %d)", len(got.Batches), execs, infers, got.InferenceCount)
			}
		})
	}
}

func TestMergeBatches(t *testing.T) {
	d := func(c, ns uint64) Duration { return Duration{Count: c, Ns: ns} }
	row := func(bs, c uint64) BatchStats {
		return BatchStats{BatchSize: bs, ComputeInput: d(c, c), ComputeInfer: d(c, 2*c), ComputeOutput: d(c, 3*c)}
	}
	for _, tc := range []struct {
		name          string
		dst, src, out []BatchStats
	}{
		{"into empty", nil, []BatchStats{row(2, 1), row(4, 3)}, []BatchStats{row(2, 1), row(4, 3)}},
		{"nothing", []BatchStats{row(1, 1)}, nil, []BatchStats{row(1, 1)}},
		{"same sizes add", []BatchStats{row(1, 1), row(8, 2)}, []BatchStats{row(1, 4), row(8, 5)}, []BatchStats{row(1, 5), row(8, 7)}},
		{"interleaved", []BatchStats{row(2, 1), row(6, 1)}, []BatchStats{row(1, 1), row(4, 2), row(8, 3)},
			[]BatchStats{row(1, 1), row(2, 1), row(4, 2), row(6, 1), row(8, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeBatches(tc.dst, tc.src); !reflect.DeepEqual(got, tc.out) {
				t.Errorf("got %+v, want %+v", got, tc.out)
			}
		})
	}
}

// TestStatsGauges checks the gauges a snapshot carries beside the
// counters: pending, load time, and nil Batches before any execution.
func TestStatsGauges(t *testing.T) {
	s := newStats()
	s.AddPending(3)
	s.AddPending(-1)
	s.setLoadDuration(1500 * time.Millisecond)
	got := s.Snapshot()
	if got.Pending != 2 || got.LoadSeconds != 1.5 || got.Batches != nil {
		t.Errorf("pending %d, load %v s, batches %v", got.Pending, got.LoadSeconds, got.Batches)
	}
	if n := len(s.shards); n == 0 || n > maxStatsShards || n&(n-1) != 0 || uint32(n-1) != s.mask {
		t.Errorf("%d shards, mask %d", n, s.mask)
	}
}
