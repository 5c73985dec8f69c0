package dynamic_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// budgetCfg is a batching model whose INT32 input x [-1] is padded with -1
// (padbatch), with extra dynamic_batching fields and parameters.
func budgetCfg(batching, params string) string {
	return `max_batch_size: 8
dynamic_batching { ` + batching + ` }
input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
parameters { key: "pad_inputs" value { string_value: "x=-1" } }
` + params + oneInstance
}

func budget(n int) string {
	return fmt.Sprintf(`parameters { key: "token_budget" value { string_value: "%d" } }`+"\n", n)
}

// int32s reads little-endian INT32 data.
func int32s(data []byte) []int32 {
	out := make([]int32, 0, len(data)/4)
	for k := 0; k+4 <= len(data); k += 4 {
		out = append(out, int32(binary.LittleEndian.Uint32(data[k:])))
	}
	return out
}

func TestTokenBudgetBatching(t *testing.T) {
	for _, tc := range []struct {
		name             string
		batching, params string
		widths           []int // queued behind a running width-2 request, one row each
		want             [][]int64
	}{
		// Padding alone: different lengths share an execution, formed as
		// usual (queue order, max_batch_size), padded to the longest.
		{"pad to the longest", "", "", []int{2, 3, 16, 2}, [][]int64{{4, 16}}},
		{"pad, max batch size", "", "", []int{2, 3, 4, 5, 6, 7, 8, 9, 10}, [][]int64{{8, 9}, {1, 10}}},
		// With a budget, rows within 2× of each other batch; the others
		// stay queued, in order, for the next batch.
		{"group by length", "", budget(1000), []int{2, 3, 16, 2, 12}, [][]int64{{3, 3}, {2, 16}}},
		{"skipped keep order", "", budget(1000), []int{2, 16, 3, 17, 2, 9}, [][]int64{{3, 3}, {3, 17}}},
		// The budget bounds rows × longest: it closes the batch.
		{"budget closes", "", budget(8), []int{2, 2, 2, 2, 2}, [][]int64{{4, 2}, {1, 2}}},
		{"longer row closes", "", budget(11), []int{2, 2, 4, 4, 4}, [][]int64{{2, 2}, {2, 4}, {1, 4}}},
		// The head goes first even when it alone passes the budget.
		{"head never starved", "", budget(4), []int{8, 2, 2}, [][]int64{{1, 8}, {2, 2}}},
		// preserve_ordering: a request is never passed; a length far off
		// the batch's closes it instead.
		{"preserve ordering", "preserve_ordering: true", budget(1000), []int{2, 3, 16, 2}, [][]int64{{2, 3}, {1, 16}, {1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b, a := busy(t, budgetCfg(tc.batching, tc.params), 2)
			ctx := context.Background()
			for i, w := range tc.widths {
				a.send(ctx, batchReq(int32(100*(i+1)), 1, w))
			}
			for range tc.want {
				step(t, b)
			}
			b.gate <- struct{}{}
			for i, w := range tc.widths {
				r := a.wait(i + 1)
				if r.err != nil {
					t.Fatalf("request %d: %v", i, r.err)
				}
				// Each gets its own row back, padded to its batch's length.
				y := r.resp.Outputs[0]
				got := int32s(y.Data)
				if len(got) < w || y.Shape[0] != 1 || int64(len(got)) != y.Shape[1] {
					t.Fatalf("request %d (width %d): y %v %v", i, w, y.Shape, got)
				}
				for k, v := range got {
					want := int32(100*(i+1) + k)
					if k >= w {
						want = -1
					}
					if v != want {
						t.Fatalf("request %d (width %d): y %v, want its own values then -1", i, w, got)
					}
				}
			}
			_, shapes := b.executions()
			if got := shapes[1:]; !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("execution shapes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTokenBudgetCancelledSkippedRequest(t *testing.T) {
	s, b, a := busy(t, budgetCfg("", budget(1000)), 2)
	cctx, cancel := context.WithCancel(context.Background())
	short := a.send(context.Background(), batchReq(1, 1, 2))
	long := a.send(cctx, batchReq(2, 1, 16))
	short2 := a.send(context.Background(), batchReq(3, 1, 3))
	cancel()
	if r := a.wait(long); core.CodeOf(r.err) != core.CodeCancelled {
		t.Fatalf("cancelled request answered %v, want CANCELLED", r.err)
	}
	if n := step(t, b); n != 2 {
		t.Fatalf("next execution has %d rows, want the two short ones", n)
	}
	b.gate <- struct{}{}
	for _, i := range []int{short, short2} {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if p := stats(t, s).Pending; p != 0 {
		t.Fatalf("%d still pending", p)
	}
}

func TestPaddedBatchingRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct{ name, cfg, want string }{
		{"unknown input", strings.Replace(budgetCfg("", ""), "x=-1", "ids=0", 1), "unknown input 'ids'"},
		{"no dynamic batching", "max_batch_size: 8\n" + `input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
parameters { key: "pad_inputs" value { string_value: "x=0" } }
`, "dynamic_batching"},
		{"budget without pads", strings.Replace(budgetCfg("", budget(8)), `key: "pad_inputs"`, `key: "other"`, 1), "needs pad_inputs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := startEcho(t, tc.cfg, true, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTokenBudgetPolicies: priority levels and queue timeouts apply to
// a token-budget batch as to any: the highest level's head starts it, a
// skipped request still times out while it waits.
func TestTokenBudgetPolicies(t *testing.T) {
	t.Run("priority", func(t *testing.T) {
		_, b, a := busy(t, budgetCfg("priority_levels: 2 default_priority_level: 2", budget(1000)), 2)
		ctx := context.Background()
		for _, r := range []struct {
			base     int32
			width    int
			priority uint64
		}{{100, 2, 2}, {200, 16, 1}, {300, 3, 2}, {400, 12, 2}, {500, 2, 1}} {
			req := batchReq(r.base, 1, r.width)
			req.Priority = r.priority
			a.send(ctx, req)
		}
		step(t, b)
		step(t, b)
		b.gate <- struct{}{}
		for i := range a.res {
			if r := a.wait(i); r.err != nil {
				t.Fatal(r.err)
			}
		}
		// Level 1's head (16) starts; the 12 of level 2 joins it; then
		// level 1's 2 with level 2's short ones.
		_, shapes := b.executions()
		want := [][]int64{{1, 2}, {2, 16}, {3, 3}}
		if !slices.EqualFunc(shapes, want, slices.Equal) {
			t.Fatalf("execution shapes %v, want %v", shapes, want)
		}
	})
	t.Run("timeout of a skipped request", func(t *testing.T) {
		_, b, a := busy(t, budgetCfg("default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true }", budget(1000)), 2)
		ctx := context.Background()
		a.send(ctx, batchReq(100, 1, 2))
		late := batchReq(200, 1, 16)
		late.TimeoutMicros = 10000
		skipped := a.send(ctx, late)
		if r := a.wait(skipped); core.CodeOf(r.err) != core.CodeUnavailable || r.err.Error() != "Request timeout expired" {
			t.Fatalf("skipped request with a 10 ms timeout: %v", r.err)
		}
		if n := step(t, b); n != 1 {
			t.Fatalf("next execution has %d rows, want 1", n)
		}
		b.gate <- struct{}{}
		if r := a.wait(1); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// TestTokenBudgetQueueDelay: a batch the budget fills leaves at once; one
// it does not waits the queue delay for more, as any batch.
func TestTokenBudgetQueueDelay(t *testing.T) {
	const delay = 200 * time.Millisecond
	s, b := echoServer(t, budgetCfg(fmt.Sprintf("max_queue_delay_microseconds: %d", delay.Microseconds()), budget(4)))
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	a := &async{t: t, s: s, b: b}
	first := time.Now()
	a.send(context.Background(), batchReq(100, 1, 2))
	a.send(context.Background(), batchReq(200, 1, 2))
	// The third fills the budget and leaves queued (a.send would wait for
	// it to be counted, which the batch it closes hides).
	third := make(chan error, 1)
	go func() {
		_, err := s.Infer(context.Background(), batchReq(300, 1, 2))
		third <- err
	}()
	if n := started(t, b); n != 2 {
		t.Fatalf("first execution has %d rows, want the 2 the budget holds", n)
	}
	if waited := time.Since(first); waited >= delay {
		t.Fatalf("a full batch waited %v, the whole queue delay", waited)
	}
	if n := started(t, b); n != 1 {
		t.Fatalf("second execution has %d rows, want 1", n)
	}
	if waited := time.Since(first); waited < delay {
		t.Fatalf("a batch with room left after %v, before the %v delay", waited, delay)
	}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if err := <-third; err != nil {
		t.Fatal(err)
	}
}

// TestTokenBudgetExactlyFull: a batch that holds the whole budget leaves
// without waiting the queue delay: no row could join it.
func TestTokenBudgetExactlyFull(t *testing.T) {
	const delay = 200 * time.Millisecond
	s, b := echoServer(t, budgetCfg(fmt.Sprintf("max_queue_delay_microseconds: %d", delay.Microseconds()), budget(6)))
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	first := time.Now()
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Infer(context.Background(), batchReq(int32(100*i), 1, 3))
			done <- err
		}()
	}
	if n := started(t, b); n == 2 && time.Since(first) >= delay {
		t.Fatalf("a batch of 2 rows × 3 under a budget of 6 waited %v", time.Since(first))
	} else if n == 1 {
		// The two arrived far apart: the first left alone after the delay.
		started(t, b)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
