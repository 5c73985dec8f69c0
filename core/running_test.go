package core

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// TestRunningGauge follows the running-requests gauge through a gated
// dynamic batcher: one request executing while three wait, then the three
// as one execution, then none.
func TestRunningGauge(t *testing.T) {
	cfg := "max_batch_size: 8\ninput [ { name: \"x\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" +
		"output [ { name: \"y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\ndynamic_batching { }\n" + oneInstance
	s, b, a := busy(t, cfg, 1)
	for i := range 3 {
		a.send(context.Background(), batchReq(int32(10*i), 1, 1))
	}
	check := func(when string, pending, running int64) {
		t.Helper()
		st := stats(t, s)
		if st.Pending != pending || st.Running != running {
			t.Fatalf("%s: pending %d, running %d; want %d, %d", when, st.Pending, st.Running, pending, running)
		}
	}
	check("first execution", 3, 1)
	// Requests count, not executions: the second runs the three as one.
	if rows := step(t, b); rows != 3 {
		t.Fatalf("second execution ran %d rows, want the 3 queued", rows)
	}
	check("second execution", 0, 3)
	b.gate <- struct{}{}
	for i := range a.res {
		if r := a.wait(i); r.err != nil {
			t.Fatal(r.err)
		}
	}
	check("all answered", 0, 0)
}

// laterBackend is a decoupled backend whose executions return at once,
// handing their requests to the test, which sends their responses later.
type laterBackend struct{ reqs chan *ExecRequest }

func (b *laterBackend) Name() string { return "later" }
func (b *laterBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *laterBackend) NewInstance(context.Context, InstanceSpec) (Instance, error) {
	return laterInstance{b}, nil
}

type laterInstance struct{ b *laterBackend }

func (i laterInstance) Execute(_ context.Context, e *Execution) error {
	for _, r := range e.Requests {
		i.b.reqs <- r
	}
	return nil
}
func (laterInstance) Close() error { return nil }

// TestRunningGaugeDecoupled checks that a decoupled request counts until
// its final response, not until its execution returns, and that one whose
// client goes away stops counting.
func TestRunningGaugeDecoupled(t *testing.T) {
	cfg := "backend: \"later\"\ninput [ { name: \"x\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" +
		"output [ { name: \"y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" +
		"model_transaction_policy { decoupled: true }\n" + oneInstance
	repos := testRepo(t, map[string]string{"m": cfg})
	b := &laterBackend{reqs: make(chan *ExecRequest, 8)}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"},
		StrictReadiness: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	ctxs := []context.Context{context.Background(), nil}
	var cancel context.CancelFunc
	ctxs[1], cancel = context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, len(ctxs))
	var reqs []*ExecRequest
	for _, ctx := range ctxs {
		req := &InferRequest{ModelName: "m", ModelVersion: LatestVersion, Inputs: []*Tensor{
			{Name: "x", DataType: TypeInt32, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}}}}
		go func() {
			done <- mv.InferStream(ctx, req, func(*InferResponse, bool) error { return nil })
		}()
		select {
		case r := <-b.reqs:
			reqs = append(reqs, r)
		case <-time.After(10 * time.Second):
			t.Fatal("no execution started")
		}
	}
	// Once both executions have returned (the one instance took the
	// second), both requests are still sending.
	deadline := time.Now().Add(10 * time.Second)
	for mv.Stats.Snapshot().ExecutionCount < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the executions never returned")
		}
		time.Sleep(time.Millisecond)
	}
	waitRunning(t, mv, 2)
	if err := reqs[0].Send(&ExecResponse{}, false); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, mv, 2)
	if err := reqs[0].Send(nil, true); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, mv, 1)
	cancel() // the second's client goes away
	waitRunning(t, mv, 0)
	for range ctxs {
		<-done
	}
	if st := mv.Stats.Snapshot(); st.Running != 0 {
		t.Fatalf("after both ended: running %d, want 0", st.Running)
	}
}

// waitRunning waits until mv's running gauge reads want.
func waitRunning(t *testing.T, mv *ModelVersion, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := mv.Stats.Snapshot().Running
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("running %d, want %d", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}
