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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// echoBackend is an in-Go backend for scheduler tests: y = x, and every
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
	// runners, when on, records per execution which goroutine ran it
	// (runnerOf).
	runners   bool
	runnersBy []string
}

func (b *echoBackend) Name() string { return "echo" }
func (b *echoBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *echoBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	if b.failNew.Add(-1) >= 0 {
		return nil, fmt.Errorf("echo: instance creation failed")
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
	if i.b.runners {
		i.b.runnersBy = append(i.b.runnersBy, runnerOf())
	}
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

func TestScatterAndStats(t *testing.T) {
	s, b, a := busy(t, `max_batch_size: 16
dynamic_batching {}
input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] } ]
`+oneInstance, 2)
	ctx := context.Background()
	base := stats(t, s)
	rows := []int{1, 3, 8}
	for i, n := range rows {
		a.send(ctx, batchReq(int32(1000*(i+1)), n, 2))
	}
	if n := step(t, b); n != 12 {
		t.Fatalf("batched execution has %d rows, want 12", n)
	}
	b.gate <- struct{}{}
	// Checklist 36: each request gets its own rows back, in its shape.
	for i, n := range rows {
		r := a.wait(i + 1)
		if r.err != nil {
			t.Fatal(r.err)
		}
		y := r.resp.Outputs[0]
		if !slices.Equal(y.Shape, []int64{int64(n), 2}) {
			t.Fatalf("request %d: shape %v, want [%d 2]", i, y.Shape, n)
		}
		want := batchReq(int32(1000*(i+1)), n, 2).Inputs[0].Data
		if string(y.Data) != string(want) {
			t.Fatalf("request %d got another request's rows", i)
		}
	}
	// As Triton counts them (triton-inference-server/server
	// docs/user_guide/metrics.md): batched requests count once each, one
	// execution.
	got := stats(t, s)
	if d := got.Success.Count - base.Success.Count; d != 4 {
		t.Fatalf("success +%d, want +4", d)
	}
	if d := got.InferenceCount - base.InferenceCount; d != 1+12 {
		t.Fatalf("inference count +%d, want +13", d)
	}
	if d := got.ExecutionCount - base.ExecutionCount; d != 2 {
		t.Fatalf("execution count +%d, want +2", d)
	}
	if got.Pending != 0 {
		t.Fatalf("pending %d after drain", got.Pending)
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

func TestRaggedInputIsFlattened(t *testing.T) {
	_, b, a := busy(t, `max_batch_size: 8
dynamic_batching {}
input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
`+oneInstance, 2)
	ctx := context.Background()
	a.send(ctx, batchReq(10, 1, 3))
	a.send(ctx, batchReq(20, 1, 1))
	step(t, b)
	b.gate <- struct{}{}
	for i := range a.res {
		a.wait(i) // the echo output cannot be split per request: not the point here
	}
	_, shapes := b.executions()
	want := [][]int64{{2}, {4}}
	if !slices.EqualFunc(shapes, want, slices.Equal) {
		t.Fatalf("execution shapes %v, want %v (ragged inputs concatenated into 1-D)", shapes, want)
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
		if CodeOf(err) != CodeUnavailable || !Rejected(err) || !strings.Contains(err.Error(), "Exceeds maximum queue size") {
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
		if CodeOf(r.err) != CodeUnavailable || r.err.Error() != "Request timeout expired" {
			t.Fatalf("timed-out request: %v", r.err)
		}
		st := stats(t, s)
		if st.Failures[FailRejected] != 1 || st.Pending != 0 {
			t.Fatalf("REJECTED %d pending %d, want 1 and 0", st.Failures[FailRejected], st.Pending)
		}
	})

	t.Run("request timeout shortens the default", func(t *testing.T) {
		_, _, a := busy(t, "max_batch_size: 1\ndynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"+io, 1)
		ctx := context.Background()
		req := batchReq(1, 1, 1)
		req.TimeoutMicros = 10000
		if r := a.wait(a.send(ctx, req)); r.err == nil || r.err.Error() != "Request timeout expired" || CodeOf(r.err) != CodeUnavailable {
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
	if r := a.wait(gone); CodeOf(r.err) != CodeCancelled {
		t.Fatalf("cancelled request answered %v, want CANCELLED while still queued", r.err)
	}
	st := stats(t, s)
	if st.Pending != 1 || st.Failures[FailCanceled] != 1 {
		t.Fatalf("pending %d CANCELED %d, want 1 and 1", st.Pending, st.Failures[FailCanceled])
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

func TestSplitFailureFailsOnlyShortRequests(t *testing.T) {
	reqs := []*ExecRequest{{BatchSize: 1, Outputs: []string{"y"}}, {BatchSize: 2, Outputs: []string{"y"}}}
	b := &ConcatBatch{Outputs: []string{"y"}, Results: []*Tensor{{Name: "y", DataType: TypeInt32, Shape: []int64{2}, Data: make([]byte, 8)}}}
	var g gatherPlan
	_, errs := g.scatter(b, reqs)
	if errs[0] != nil {
		t.Fatalf("first request's rows exist: %v", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "failed to split the output tensor") {
		t.Fatalf("second request: %v, want a split error", errs[1])
	}
}

func TestSliceRowsBytes(t *testing.T) {
	var data []byte
	for _, s := range []string{"a", "bb", "", "dddd"} {
		data = binary.LittleEndian.AppendUint32(data, uint32(len(s)))
		data = append(data, s...)
	}
	tensor := &Tensor{Name: "s", DataType: TypeBytes, Shape: []int64{2, 2}, Data: data}
	got := &Tensor{}
	if err := sliceRows(got, tensor, 1, 1); err != nil {
		t.Fatal(err)
	}
	if elems, err := BytesElements(got.Data); err != nil || len(elems) != 2 || string(elems[0]) != "" || string(elems[1]) != "dddd" {
		t.Fatalf("row 1 = %q", elems)
	}
	if err := sliceRows(&Tensor{}, tensor, 1, 2); err == nil {
		t.Fatal("cutting past the end succeeded")
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
	if _, err := s.Infer(context.Background(), batchReq(1, 1, 1)); CodeOf(err) != CodeUnavailable {
		t.Fatalf("request to a passive-only model: %v, want UNAVAILABLE at once", err)
	}
}
