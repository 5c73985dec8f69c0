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
	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The rate limiter's fixtures are those of core/ratelimit_test.go.

// limitBackend is an in-Go backend for rate limiter tests: y = x, and every
// execution reports its model as it starts and then waits at a gate the
// test opens one execution at a time.
type limitBackend struct {
	started chan string // the model of each execution, as it starts
	gate    chan struct{}

	mu   sync.Mutex
	rows map[string][]int // rows of each execution, by model
}

func (b *limitBackend) Name() string { return "limit" }
func (b *limitBackend) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *limitBackend) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, &limitInstance{b: b, model: spec.ModelName}), nil
}

type limitInstance struct {
	b     *limitBackend
	model string
}

func (i *limitInstance) Execute(ctx context.Context, batch *core.ConcatBatch) error {
	x := batch.Inputs[0]
	i.b.mu.Lock()
	i.b.rows[i.model] = append(i.b.rows[i.model], len(x.Data)/4)
	i.b.mu.Unlock()
	i.b.started <- i.model
	select {
	case <-i.b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	batch.ComputeStart, batch.InferStart, batch.InferEnd, batch.ComputeEnd = now, now, now, now
	batch.Results = []*core.Tensor{{Name: "y", DataType: x.DataType, Shape: x.Shape, Data: x.Data}}
	return nil
}
func (i *limitInstance) Close() error { return nil }

// limitIO is the tensors of every gate model: x and y, one INT32.
const limitIO = `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`

// limited is an instance group of one CPU instance (on device 0, unless
// gpus are given) with the given rate_limiter body.
func limited(kind, limiter string) string {
	return fmt.Sprintf("instance_group [ { %s count: 1 rate_limiter { %s } } ]\n", kind, limiter)
}

// limitServer starts a server over models (name -> config body; backend
// and tensors are added) with the rate limiter rl (nil: off), on a host
// with GPUs 0 and 1 (the gate backend never touches them).
func limitServer(t *testing.T, rl *ratelimit.Limiter, models map[string]string) (*core.Server, *limitBackend, error) {
	t.Helper()
	var names []string
	configs := map[string]string{}
	for name, cfg := range models {
		names = append(names, name)
		configs[name] = "backend: \"limit\"\n" + limitIO + cfg
	}
	repos := testRepo(t, configs)
	b := &limitBackend{started: make(chan string, 64), gate: make(chan struct{}), rows: map[string][]int{}}
	s := core.NewServer(core.Options{Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: names, StrictReadiness: true,
		GPUs: []int32{0, 1}, RateLimiter: rl, Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		close(b.gate) // lets every execution left finish
		s.Shutdown(context.Background())
	})
	return s, b, s.Start(context.Background())
}

// limitReq is a request of x = v to model, batched when batched is set.
func limitReq(model string, v int32, batched bool) *core.InferRequest {
	shape := []int64{1}
	if batched {
		shape = []int64{1, 1}
	}
	return &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
		{Name: "x", DataType: core.TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(v))},
	}}
}

// inferAsync sends req and returns where its answer (nil or the error)
// arrives, checking y = x.
func inferAsync(s *core.Server, req *core.InferRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := s.Infer(context.Background(), req)
		if err == nil && !slices.Equal(resp.Outputs[0].Data, req.Inputs[0].Data) {
			err = fmt.Errorf("y = %v for x = %v", resp.Outputs[0].Data, req.Inputs[0].Data)
		}
		done <- err
	}()
	return done
}

func startedModel(t *testing.T, b *limitBackend) string {
	t.Helper()
	select {
	case m := <-b.started:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no execution started")
		return ""
	}
}

// notStarted checks that no execution starts for a while: the waiting
// one is held back by the rate limiter.
func notStarted(t *testing.T, b *limitBackend) {
	t.Helper()
	select {
	case m := <-b.started:
		t.Fatalf("an execution of %s started while its resources were taken", m)
	case <-time.After(300 * time.Millisecond):
	}
}

func answered(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request never answered")
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRateLimiterSequenceBatching: a sequence's requests wait for their
// instance's resources and still run in order on their slot.
func TestRateLimiterSequenceBatching(t *testing.T) {
	rl := ratelimit.New(nil)
	need := `resources [ { name: "R" global: true count: 1 } ]`
	s, b, err := limitServer(t, rl, map[string]string{
		"blocker":  limited("kind: KIND_CPU", need),
		"sequence": "max_batch_size: 4\nsequence_batching { }\n" + limited("kind: KIND_CPU", need),
	})
	if err != nil {
		t.Fatal(err)
	}
	blocker := inferAsync(s, limitReq("blocker", 0, false))
	startedModel(t, b)
	flags := []uint32{core.FlagSequenceStart, 0, core.FlagSequenceEnd}
	var dones []<-chan error
	for i, f := range flags {
		req := limitReq("sequence", int32(10+i), true)
		req.Correlation = core.Correlation{ID: 7, Flags: f}
		queued := make(chan struct{})
		req.Queued = func() { close(queued) }
		dones = append(dones, inferAsync(s, req))
		<-queued // the sequence's order is the order of arrival
		if i == 0 {
			waitFor(t, "the sequence waiting for the resource", func() bool { return rl.Waiting() == 1 })
		}
	}
	notStarted(t, b)
	b.gate <- struct{}{}
	answered(t, blocker)
	for i := range flags {
		if m := startedModel(t, b); m != "sequence" {
			t.Fatalf("%s started", m)
		}
		b.gate <- struct{}{}
		answered(t, dones[i])
	}
}
