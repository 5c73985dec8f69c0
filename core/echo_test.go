package core

import (
	"context"
	"encoding/binary"

	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// echoBackend is an in-Go backend for the core's tests: y = x, and every
// execution waits at a gate the test opens one execution at a time.
type echoBackend struct {
	mu      sync.Mutex
	batches [][]int32 // the x values of each execution, in start order
	shapes  [][]int64
	started chan int // receives the number of rows of each started execution
	gate    chan struct{}
	open    bool // executions do not wait
	execs   atomic.Int64
	panicOn atomic.Int32 // an execution whose first x is this (non-zero) value panics
	failNew atomic.Int32 // instance creations still to fail
	// parallel makes it a backend whose instances may be created at once;
	// each creation then lasts createFor, or, with gather set, until that
	// many run at once (10 s at most, so that a busy machine cannot make
	// them miss each other), and mostCreating records how many did.
	parallel               atomic.Bool
	gather                 atomic.Int32
	creating, mostCreating atomic.Int32
}

const createFor = 100 * time.Millisecond

func (b *echoBackend) ParallelInstances() bool { return b.parallel.Load() }

func (b *echoBackend) Name() string { return "echo" }
func (b *echoBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *echoBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	if b.failNew.Add(-1) >= 0 {
		return nil, fmt.Errorf("echo: instance creation failed")
	}
	if b.parallel.Load() {
		n := b.creating.Add(1)
		for m := b.mostCreating.Load(); n > m && !b.mostCreating.CompareAndSwap(m, n); m = b.mostCreating.Load() {
		}
		if g := b.gather.Load(); g > 0 {
			for end := time.Now().Add(10 * time.Second); b.mostCreating.Load() < g && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
		} else {
			time.Sleep(createFor)
		}
		b.creating.Add(-1)
	}
	return Concatenated(spec.Config, &echoInstance{b: b}), nil
}

type echoInstance struct{ b *echoBackend }

func (i *echoInstance) Execute(ctx context.Context, batch *ConcatBatch) error {
	x := batch.Inputs[0]
	var vals []int32
	for k := 0; k+4 <= len(x.Data); k += 4 {
		vals = append(vals, int32(binary.LittleEndian.Uint32(x.Data[k:])))
	}
	i.b.mu.Lock()
	i.b.batches = append(i.b.batches, vals)
	i.b.shapes = append(i.b.shapes, x.Shape)
	open := i.b.open
	i.b.mu.Unlock()
	i.b.execs.Add(1)
	if p := i.b.panicOn.Load(); p != 0 && len(vals) > 0 && vals[0] == p {
		panic(fmt.Sprintf("echo: x = %d", p))
	}
	rows := 0
	if len(x.Shape) > 0 {
		rows = int(x.Shape[0])
	}
	if open {
		select { // nobody may be counting executions
		case i.b.started <- rows:
		default:
		}
	} else {
		i.b.started <- rows
	}
	if !open {
		select {
		case <-i.b.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := time.Now()
	batch.ComputeStart, batch.InferStart, batch.InferEnd, batch.ComputeEnd = now, now, now, now
	batch.Results = []*Tensor{{Name: "y", DataType: x.DataType, Shape: x.Shape, Data: x.Data}}
	return nil
}
func (i *echoInstance) Close() error { return nil }

func (b *echoBackend) executions() ([][]int32, [][]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches), slices.Clone(b.shapes)
}

// echoServer loads model "m" with the given config body (name and backend
// are added) on the echo backend.
func echoServer(t *testing.T, cfg string) (*Server, *echoBackend) {
	t.Helper()
	s, b, err := startEcho(t, cfg, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// startEcho starts a server over model "m" with extra files (relative to
// the model folder); open executions never wait at the gate.
func startEcho(t testing.TB, cfg string, open bool, files map[string][]byte) (*Server, *echoBackend, error) {
	t.Helper()
	return startEchoWith(t, cfg, open, files, Options{StrictReadiness: true})
}

// startEchoWith is startEcho with further server options (opts; the
// repository, backend, control mode, start-up model and logger are set).
func startEchoWith(t testing.TB, cfg string, open bool, files map[string][]byte, opts Options) (*Server, *echoBackend, error) {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		path := filepath.Join(root, "m", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "m", "config.pbtxt"), []byte("backend: \"echo\"\n"+cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: open}
	opts.Repos, opts.Backends, opts.ControlMode, opts.StartupModels = repos, []Backend{b}, ModeExplicit, []string{"m"}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := newTestServer(opts)
	if err := s.Start(context.Background()); err != nil {
		return nil, nil, err
	}
	if !s.Ready() {
		idx, _ := s.Index(context.Background(), false)
		return nil, nil, fmt.Errorf("model not ready: %+v", idx)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		b.open = true
		b.mu.Unlock()
		close(b.gate)
		s.Shutdown(context.Background())
	})
	return s, b, nil
}

// batchReq is a request of rows rows of width values each, x = base + i.
func batchReq(base int32, rows, width int) *InferRequest {
	data := make([]byte, 0, rows*width*4)
	for i := range rows * width {
		data = binary.LittleEndian.AppendUint32(data, uint32(base+int32(i)))
	}
	return &InferRequest{ModelName: "m", ModelVersion: LatestVersion, Inputs: []*Tensor{
		{Name: "x", DataType: TypeInt32, Shape: []int64{int64(rows), int64(width)}, Data: data},
	}}
}

type result struct {
	resp *InferResponse
	err  error
	at   int // completion order
}

// async runs requests concurrently, one goroutine each, submitted in order
// (each is queued before the next is sent).
type async struct {
	t   *testing.T
	s   *Server
	b   *echoBackend
	mu  sync.Mutex
	n   int
	res []chan result
	// atRelease numbers results in the order the scheduler releases them
	// (through InferStream's emit) instead of the order Infer returns.
	atRelease bool
}

func (a *async) send(ctx context.Context, req *InferRequest) int {
	a.t.Helper()
	ch := make(chan result, 1)
	a.res = append(a.res, ch)
	before := a.entered()
	go func() {
		if a.atRelease {
			// Counted as the scheduler hands the response on, not as this
			// goroutine wakes: the runtime may wake two in either order.
			var res result
			mv, release, err := a.s.Acquire("m", LatestVersion)
			if err == nil {
				err = mv.InferStream(ctx, req, func(resp *InferResponse, final bool) error {
					if final {
						a.mu.Lock()
						a.n++
						res.at = a.n
						a.mu.Unlock()
					}
					if resp != nil {
						res.resp = resp
					}
					return nil
				})
				release()
			}
			res.err = err
			ch <- res
			return
		}
		resp, err := a.s.Infer(ctx, req)
		a.mu.Lock()
		a.n++
		at := a.n
		a.mu.Unlock()
		ch <- result{resp, err, at}
	}()
	// Wait until it is queued (or answered), so queue order is send order.
	deadline := time.Now().Add(5 * time.Second)
	for a.entered() == before && len(ch) == 0 {
		if time.Now().After(deadline) {
			a.t.Fatal("request never reached the queue")
		}
		time.Sleep(50 * time.Microsecond)
	}
	return len(a.res) - 1
}

// entered counts requests that reached the scheduler: queued ones plus
// executions started (a request sent to an idle instance starts one).
func (a *async) entered() int64 {
	mv, release, err := a.s.Acquire("m", LatestVersion)
	if err != nil {
		a.t.Fatal(err)
	}
	defer release()
	return mv.Stats.Snapshot().Pending + a.b.execs.Load()
}

func (a *async) wait(i int) result {
	a.t.Helper()
	select {
	case r := <-a.res[i]:
		a.res[i] <- r
		return r
	case <-time.After(10 * time.Second):
		a.t.Fatalf("request %d never answered", i)
		return result{}
	}
}

// busy starts the echo server and occupies its (first) instance with a
// request of one row of width values, so that what follows queues.
func busy(t *testing.T, cfg string, width int) (*Server, *echoBackend, *async) {
	t.Helper()
	s, b := echoServer(t, cfg)
	a := &async{t: t, s: s, b: b}
	a.send(context.Background(), batchReq(0, 1, width))
	started(t, b)
	return s, b, a
}

// step lets one execution finish and returns the rows of the next one to
// start.
func step(t *testing.T, b *echoBackend) int {
	t.Helper()
	b.gate <- struct{}{}
	return started(t, b)
}

func started(t *testing.T, b *echoBackend) int {
	t.Helper()
	select {
	case n := <-b.started:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no execution started")
		return 0
	}
}

func stats(t *testing.T, s *Server) StatsSnapshot {
	t.Helper()
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	return mv.Stats.Snapshot()
}

const oneInstance = "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
