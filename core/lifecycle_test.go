package core

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// gateBackend is an in-Go backend for lifecycle tests: Identity over INT32,
// whose executions wait for the test to open the gate.
type gateBackend struct {
	gate    chan struct{}
	started chan struct{}
	loads   atomic.Int32
}

func (b *gateBackend) Name() string { return "gate" }
func (b *gateBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *gateBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	b.loads.Add(1)
	return Concatenated(spec.Config, &gateInstance{b: b}), nil
}

type gateInstance struct{ b *gateBackend }

func (i *gateInstance) Execute(ctx context.Context, batch *ConcatBatch) error {
	i.b.started <- struct{}{}
	select {
	case <-i.b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	batch.ComputeStart, batch.InferStart, batch.InferEnd, batch.ComputeEnd = now, now, now, now
	in := batch.Inputs[0]
	batch.Results = []*Tensor{{Name: "y", DataType: in.DataType, Shape: in.Shape, Data: in.Data}}
	return nil
}
func (i *gateInstance) Close() error { return nil }

func gateServer(t *testing.T) (*Server, *gateBackend) {
	t.Helper()
	cfg := `backend: "gate"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	repos := testRepo(t, map[string]string{"m": cfg})
	b := &gateBackend{gate: make(chan struct{}), started: make(chan struct{}, 16)}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"}, StrictReadiness: true})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, b
}

// inFlight sends request(v) and returns once the gate backend runs it; the
// channel gets its result after the gate opens.
func inFlight(s *Server, b *gateBackend, v int32) <-chan error {
	result := make(chan error, 1)
	go func() {
		_, err := s.Infer(context.Background(), request(v))
		result <- err
	}()
	<-b.started
	return result
}

func request(v int32) *InferRequest {
	return &InferRequest{ModelName: "m", ModelVersion: LatestVersion, Inputs: []*Tensor{
		{Name: "x", DataType: TypeInt32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, uint32(v))},
	}}
}

func stateOf(t *testing.T, s *Server) (State, string) {
	t.Helper()
	idx, err := s.Index(context.Background(), false)
	if err != nil || len(idx) != 1 {
		t.Fatalf("index %v %v", idx, err)
	}
	return idx[0].State, idx[0].Reason
}

func TestUnloadWaitsForInFlight(t *testing.T) {
	s, b := gateServer(t)
	result := inFlight(s, b, 7)
	unloaded := make(chan error, 1)
	go func() { unloaded <- s.Unload(context.Background(), "m") }()
	deadline := time.Now().Add(5 * time.Second)
	for st, _ := stateOf(t, s); st != StateUnloading; st, _ = stateOf(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("state %v, want UNLOADING while a request runs", st)
		}
		time.Sleep(time.Millisecond)
	}
	if s.Ready() {
		t.Error("ready while unloading")
	}
	if _, err := s.Infer(context.Background(), request(1)); CodeOf(err) != CodeNotFound {
		t.Errorf("new request during unload: %v", err)
	}
	close(b.gate)
	if err := <-result; err != nil {
		t.Fatalf("in-flight request failed: %v", err)
	}
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if st, reason := stateOf(t, s); st != StateUnavailable || reason != "unloaded" || !s.Ready() {
		t.Errorf("after unload: %v %q ready=%v", st, reason, s.Ready())
	}
}

func TestReloadSwitchesCopies(t *testing.T) {
	s, b := gateServer(t)
	old, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	release()
	result := inFlight(s, b, 3)
	// A changed file makes the load a reload (an unchanged model is a no-op).
	cfgPath := filepath.Join(s.opts.Repos.Sources[0].String(), "m", "config.pbtxt")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(cfg, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
	fresh, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if fresh == old || b.loads.Load() != 2 {
		t.Fatalf("reload did not build a new copy (loads %d)", b.loads.Load())
	}
	close(b.gate)
	if err := <-result; err != nil {
		t.Fatalf("request on the old copy failed: %v", err)
	}
	if resp, err := s.Infer(context.Background(), request(5)); err != nil || binary.LittleEndian.Uint32(resp.Outputs[0].Data) != 5 {
		t.Fatalf("request on the new copy: %v %v", resp, err)
	}
}

func TestCancelledWhileQueued(t *testing.T) {
	s, b := gateServer(t)
	first := inFlight(s, b, 1) // the single instance is busy
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := s.Infer(ctx, request(2))
		second <- err
	}()
	mv, release, _ := s.Acquire("m", LatestVersion)
	defer release()
	for mv.Stats.Snapshot().Pending != 1 { // wait until it is queued
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(b.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	err := <-second
	if CodeOf(err) != CodeCancelled && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	st := mv.Stats.Snapshot()
	if st.Failures[FailCanceled] != 1 || st.Success.Count != 1 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}
