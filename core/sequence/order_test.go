package sequence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo/modelconfig"
)

// reverseBackend answers an execution's requests last first (y = x), from
// Execute or, when decoupled, after it returns; its first execution waits
// at gate, so that the next requests queue up behind it.
type reverseBackend struct {
	decoupled bool
	started   chan struct{}
	gate      chan struct{}
	once      sync.Once
}

func (b *reverseBackend) Name() string { return "reverse" }
func (b *reverseBackend) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *reverseBackend) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return b, nil
}
func (b *reverseBackend) Close() error { return nil }

func (b *reverseBackend) Execute(_ context.Context, e *core.Execution) error {
	b.once.Do(func() {
		b.started <- struct{}{}
		<-b.gate
	})
	reqs := slices.Clone(e.Requests)
	send := func() {
		for _, r := range slices.Backward(reqs) {
			y := &core.Tensor{Name: "y", DataType: core.TypeInt32, Shape: []int64{1, 1}, Data: slices.Clone(r.Inputs[0].Data)}
			_ = r.Send(&core.ExecResponse{Outputs: []*core.Tensor{y}}, true)
		}
	}
	now := time.Now()
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = now, now, now, now
	if b.decoupled {
		go send()
		return nil
	}
	send()
	return nil
}

// reverseServer loads model "m" (config body cfg) on b.
func reverseServer(t *testing.T, b *reverseBackend, cfg string) *core.Server {
	t.Helper()
	repos := testRepo(t, map[string]string{"m": "backend: \"reverse\"\n" + cfg})
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"m"}, StrictReadiness: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.Ready() {
		idx, _ := s.Index(context.Background(), false)
		t.Fatalf("model not ready: %+v", idx)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// Under the oldest strategy with preserve_ordering, the responses of a
// batch reach their clients in the order the batcher took the requests,
// however the model sends them (as the dynamic batcher's
// preserve_ordering, triton-inference-server/server docs/user_guide/batcher.md);
// without it they arrive as sent.
func TestSequenceOldestPreserveOrdering(t *testing.T) {
	for _, tc := range []struct {
		preserve, decoupled bool
		want                []int32
	}{
		{false, false, []int32{3, 2, 1}},
		{true, false, []int32{1, 2, 3}},
		{false, true, []int32{3, 2, 1}},
		{true, true, []int32{1, 2, 3}},
	} {
		t.Run(fmt.Sprintf("preserve=%v,decoupled=%v", tc.preserve, tc.decoupled), func(t *testing.T) {
			b := &reverseBackend{decoupled: tc.decoupled, started: make(chan struct{}, 1), gate: make(chan struct{})}
			s := reverseServer(t, b, fmt.Sprintf("max_batch_size: 4\n%s%s"+
				"model_transaction_policy { decoupled: %v }\n"+
				"sequence_batching { oldest { max_candidate_sequences: 4 preserve_ordering: %v } }\n",
				oneInstance, accIO, tc.decoupled, tc.preserve))
			mv, release, err := s.Acquire("m", core.LatestVersion)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			var mu sync.Mutex
			var got []int32
			var wg sync.WaitGroup
			send := func(id uint64, x int32) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := seqReq(core.Correlation{ID: id, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, x, true)
					err := mv.InferStream(context.Background(), req, func(resp *core.InferResponse, _ bool) error {
						if resp != nil && x != 0 {
							mu.Lock()
							got = append(got, int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data)))
							mu.Unlock()
						}
						return nil
					})
					if err != nil {
						t.Errorf("sequence %d: %v", id, err)
					}
				}()
			}
			send(9, 0) // the blocker: its execution holds the instance
			select {
			case <-b.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the blocker never ran")
			}
			for i := range int32(3) {
				send(uint64(i+1), i+1)
				waitPending(t, s, int64(i+1)) // queued in this order
			}
			close(b.gate)
			wg.Wait()
			if !slices.Equal(got, tc.want) {
				t.Errorf("responses in order %v, want %v", got, tc.want)
			}
		})
	}
}
