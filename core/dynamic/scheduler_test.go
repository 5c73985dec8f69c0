package dynamic_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// batchSizes runs: one blocker request, then queued requests of the given
// batch sizes while the blocker runs; returns the row counts of the
// executions that follow.
func batchSizes(t *testing.T, cfg string, sizes []int) []int {
	_, b, a := busy(t, cfg, 1)
	ctx := context.Background()
	for i, n := range sizes {
		a.send(ctx, batchReq(int32(100*i), n, 1))
	}
	var got []int
	total := 0
	for total < sum(sizes) {
		n := step(t, b)
		got = append(got, n)
		total += n
	}
	b.gate <- struct{}{}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
	}
	return got
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func TestBatchFormation(t *testing.T) {
	const io = `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
` + oneInstance
	for _, tc := range []struct {
		name  string
		cfg   string
		sizes []int
		want  []int
	}{
		// Checklist 31: D = 0, no preferred sizes: whatever is queued, up
		// to max_batch_size.
		{"no preference", "max_batch_size: 8\ndynamic_batching {}\n", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{8, 2}},
		// Checklist 32: preferred {4,8}, six queued: 4 now, 2 next.
		{"preferred 4 of 6", "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 8 ] }\n", []int{1, 1, 1, 1, 1, 1}, []int{4, 2}},
		{"preferred 8 of 9", "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 8 ] }\n", []int{1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{8, 1}},
		// Requests already carrying a batch are merged, never split.
		{"merge batches", "max_batch_size: 8\ndynamic_batching {}\n", []int{3, 2, 4, 1}, []int{5, 5}},
		{"preferred stops before overflow", "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4 ] }\n", []int{3, 2, 1}, []int{3, 3}},
		// Default scheduler: one request per execution, batch as sent.
		{"default scheduler", "max_batch_size: 8\n", []int{3, 1, 2}, []int{3, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := batchSizes(t, tc.cfg+io, tc.sizes)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("executions %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShapesNeverMixed(t *testing.T) {
	// Checklist 34/35: a variable dim is compared, a fixed one is not, and
	// a mismatch closes the batch without reordering.
	_, b, a := busy(t, `max_batch_size: 8
dynamic_batching {}
input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
`+oneInstance, 2)
	ctx := context.Background()
	for i, w := range []int{2, 2, 3, 2} {
		a.send(ctx, batchReq(int32(10*i), 1, w))
	}
	step(t, b)
	step(t, b)
	step(t, b)
	b.gate <- struct{}{}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	_, shapes := b.executions()
	want := [][]int64{{1, 2}, {2, 2}, {1, 3}, {1, 2}}
	if !slices.EqualFunc(shapes, want, slices.Equal) {
		t.Fatalf("execution shapes %v, want %v", shapes, want)
	}
}

func TestQueueDelay(t *testing.T) {
	// Checklist 33: with D > 0 and fewer requests than preferred, the batch
	// goes once the oldest has waited D, with everything compatible.
	const delay = 30 * time.Millisecond
	s, b := echoServer(t, fmt.Sprintf(`max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: %d }
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, delay.Microseconds())+oneInstance)
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	a := &async{t: t, s: s, b: b}
	first := time.Now()
	for i := range 3 {
		a.send(context.Background(), batchReq(int32(i), 1, 1))
	}
	if n := started(t, b); n != 3 {
		t.Fatalf("first execution has %d rows, want 3", n)
	}
	if waited := time.Since(first); waited < delay {
		t.Fatalf("batch left after %v, before the %v delay", waited, delay)
	}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestQueuePolicy(t *testing.T) {
	const io = `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
` + oneInstance

	t.Run("max queue size", func(t *testing.T) {
		// Checklist 37 and metrics 12.
		s, _, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { max_queue_size: 2 } }\n"+io, 1)
		ctx := context.Background()
		a.send(ctx, batchReq(1, 1, 1))
		a.send(ctx, batchReq(2, 1, 1))
		_, err := s.Infer(ctx, batchReq(3, 1, 1))
		if core.CodeOf(err) != core.CodeUnavailable || !core.Rejected(err) || !strings.Contains(err.Error(), "Exceeds maximum queue size") {
			t.Fatalf("third queued request: %v, want UNAVAILABLE Exceeds maximum queue size", err)
		}
		st := stats(t, s)
		if st.Pending != 2 || st.Fail.Count != 0 {
			t.Fatalf("pending %d failures %d, want 2 and 0", st.Pending, st.Fail.Count)
		}
	})

	t.Run("timeout reject", func(t *testing.T) {
		// Checklist 38 and metrics 13.
		s, _, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { default_timeout_microseconds: 20000 } }\n"+io, 1)
		ctx := context.Background()
		i := a.send(ctx, batchReq(1, 1, 1))
		r := a.wait(i)
		if core.CodeOf(r.err) != core.CodeUnavailable || r.err.Error() != "Request timeout expired" {
			t.Fatalf("timed-out request: %v", r.err)
		}
		st := stats(t, s)
		if st.Failures[core.FailRejected] != 1 || st.Pending != 0 {
			t.Fatalf("REJECTED %d pending %d, want 1 and 0", st.Failures[core.FailRejected], st.Pending)
		}
	})

	t.Run("request timeout shortens the default", func(t *testing.T) {
		_, _, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"+io, 1)
		ctx := context.Background()
		req := batchReq(1, 1, 1)
		req.TimeoutMicros = 10000
		if r := a.wait(a.send(ctx, req)); r.err == nil || r.err.Error() != "Request timeout expired" || core.CodeOf(r.err) != core.CodeUnavailable {
			t.Fatalf("request with a 10 ms timeout: %v", r.err)
		}
	})

	t.Run("override ignored without a default", func(t *testing.T) {
		// Checklist 39.
		_, b, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { allow_timeout_override: true } }\n"+io, 1)
		ctx := context.Background()
		req := batchReq(1, 1, 1)
		req.TimeoutMicros = 1000
		i := a.send(ctx, req)
		time.Sleep(20 * time.Millisecond) // well past the request's 1 ms
		step(t, b)
		b.gate <- struct{}{}
		if r := a.wait(i); r.err != nil {
			t.Fatalf("request timeout applied without a default timeout: %v", r.err)
		}
	})

	t.Run("delay serves timed-out requests last", func(t *testing.T) {
		_, b, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"+io, 1)
		ctx := context.Background()
		late := batchReq(1, 1, 1)
		late.TimeoutMicros = 1000
		a.send(ctx, late)
		time.Sleep(10 * time.Millisecond)
		a.send(ctx, batchReq(2, 1, 1))
		step(t, b)
		step(t, b)
		b.gate <- struct{}{}
		for i := range a.res {
			if r := a.wait(i); r.err != nil {
				t.Fatal(r.err)
			}
		}
		batches, _ := b.executions()
		if got := [][]int32{{0}, {2}, {1}}; !slices.EqualFunc(batches, got, slices.Equal) {
			t.Fatalf("execution order %v, want %v", batches, got)
		}
	})
}

func TestPriorityLevels(t *testing.T) {
	// Checklist 40: 0 and > levels map to the default level; level 1 first.
	_, b, a := busy(t, `max_batch_size: 1
dynamic_batching { priority_levels: 2 default_priority_level: 2 }
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`+oneInstance, 1)
	ctx := context.Background()
	for _, pr := range []struct {
		v        int32
		priority uint64
	}{{1, 2}, {2, 0}, {3, 1}, {4, 7}, {5, 1}} {
		req := batchReq(pr.v, 1, 1)
		req.Priority = pr.priority
		a.send(ctx, req)
	}
	for range 5 {
		step(t, b)
	}
	b.gate <- struct{}{}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	batches, _ := b.executions()
	want := [][]int32{{0}, {3}, {5}, {1}, {2}, {4}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("execution order %v, want %v", batches, want)
	}
}

func TestCancelledRequestLeavesQueue(t *testing.T) {
	s, b := echoServer(t, "max_batch_size: 4\ndynamic_batching {}\n"+`input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`+oneInstance)
	a := &async{t: t, s: s, b: b}
	a.send(context.Background(), batchReq(0, 1, 1))
	started(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	gone := a.send(ctx, batchReq(1, 1, 1))
	kept := a.send(context.Background(), batchReq(2, 1, 1))
	cancel()
	if r := a.wait(gone); core.CodeOf(r.err) != core.CodeCancelled {
		t.Fatalf("cancelled request answered %v, want CANCELLED while still queued", r.err)
	}
	st := stats(t, s)
	if st.Pending != 1 || st.Failures[core.FailCanceled] != 1 {
		t.Fatalf("pending %d CANCELED %d, want 1 and 1", st.Pending, st.Failures[core.FailCanceled])
	}
	if n := step(t, b); n != 1 {
		t.Fatalf("next execution has %d rows, want only the request still waiting", n)
	}
	b.gate <- struct{}{}
	if r := a.wait(kept); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestPreserveOrdering(t *testing.T) {
	// Two instances: the second batch finishes first but is released
	// after the first when preserve_ordering is set.
	for _, preserve := range []bool{false, true} {
		t.Run(fmt.Sprint(preserve), func(t *testing.T) {
			s, b := echoServer(t, fmt.Sprintf(`max_batch_size: 1
dynamic_batching { preserve_ordering: %v }
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`, preserve))
			a := &async{t: t, s: s, b: b, atRelease: true}
			ctx := context.Background()
			first := a.send(ctx, batchReq(0, 1, 1))
			started(t, b)
			second := a.send(ctx, batchReq(1, 1, 1))
			started(t, b)
			b.gate <- struct{}{} // one of the two finishes; which is up to the runtime
			time.Sleep(20 * time.Millisecond)
			b.gate <- struct{}{}
			r1, r2 := a.wait(first), a.wait(second)
			if r1.err != nil || r2.err != nil {
				t.Fatal(r1.err, r2.err)
			}
			if preserve && r1.at > r2.at {
				t.Fatalf("responses released out of order: first at %d, second at %d", r1.at, r2.at)
			}
		})
	}
}

func TestDefaultSchedulerRunsInstancesInParallel(t *testing.T) {
	s, b := echoServer(t, `max_batch_size: 0
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1, 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1, 1 ] } ]
instance_group [ { kind: KIND_CPU count: 3 } ]
`)
	a := &async{t: t, s: s, b: b}
	for i := range 3 {
		a.send(context.Background(), batchReq(int32(i), 1, 1))
	}
	for range 3 {
		started(t, b) // all three run at once, none waits for another
	}
	for range 3 {
		b.gate <- struct{}{}
	}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestOnlyPassiveInstancesRefuse(t *testing.T) {
	s, _, err := startEcho(t, `max_batch_size: 1
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 passive: true } ]
`, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Infer(context.Background(), batchReq(1, 1, 1)); core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("request to a passive-only model: %v, want UNAVAILABLE at once", err)
	}
}
