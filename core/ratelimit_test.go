package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/repo/modelconfig"
)

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
func (b *limitBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *limitBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	return Concatenated(spec.Config, &limitInstance{b: b, model: spec.ModelName}), nil
}

type limitInstance struct {
	b     *limitBackend
	model string
}

func (i *limitInstance) Execute(ctx context.Context, batch *ConcatBatch) error {
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
	batch.Results = []*Tensor{{Name: "y", DataType: x.DataType, Shape: x.Shape, Data: x.Data}}
	return nil
}
func (i *limitInstance) Close() error { return nil }

// resourceMap and globalKey spell the rate limiter's Available.
type resourceMap = map[int]map[string]uint64

const globalKey = ratelimit.GlobalDevice

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
func limitServer(t *testing.T, rl *ratelimit.Limiter, models map[string]string) (*Server, *limitBackend, error) {
	t.Helper()
	var names []string
	configs := map[string]string{}
	for name, cfg := range models {
		names = append(names, name)
		configs[name] = "backend: \"limit\"\n" + limitIO + cfg
	}
	repos := testRepo(t, configs)
	b := &limitBackend{started: make(chan string, 64), gate: make(chan struct{}), rows: map[string][]int{}}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: names, StrictReadiness: true,
		GPUs: []int32{0, 1}, RateLimiter: rl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		close(b.gate) // lets every execution left finish
		s.Shutdown(context.Background())
	})
	return s, b, s.Start(context.Background())
}

// limitReq is a request of x = v to model, batched when batched is set.
func limitReq(model string, v int32, batched bool) *InferRequest {
	shape := []int64{1}
	if batched {
		shape = []int64{1, 1}
	}
	return &InferRequest{ModelName: model, ModelVersion: LatestVersion, Inputs: []*Tensor{
		{Name: "x", DataType: TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(v))},
	}}
}

// inferAsync sends req and returns where its answer (nil or the error)
// arrives, checking y = x.
func inferAsync(s *Server, req *InferRequest) <-chan error {
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

// TestRateLimiterResources runs model a, then model b while a executes:
// b waits exactly when the resources a holds leave too few for it.
func TestRateLimiterResources(t *testing.T) {
	tests := []struct {
		name      string
		off       bool
		explicit  []ratelimit.Resource
		a, b      string
		bWaits    bool
		wantAvail resourceMap
	}{
		{name: "same device, not enough left", a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 2 } ]`),
			b: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`), bWaits: true, wantAvail: resourceMap{0: {"R": 2}}},
		{name: "rate limiting off ignores resources", off: true, a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 2 } ]`),
			b: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`)},
		{name: "other resource", a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`),
			b: limited("kind: KIND_CPU", `resources [ { name: "S" count: 1 } ]`), wantAvail: resourceMap{0: {"R": 1, "S": 1}}},
		{name: "per device on two GPUs", a: limited("kind: KIND_GPU gpus: [ 0 ]", `resources [ { name: "R" count: 1 } ]`),
			b: limited("kind: KIND_GPU gpus: [ 1 ]", `resources [ { name: "R" count: 1 } ]`), wantAvail: resourceMap{0: {"R": 1}, 1: {"R": 1}}},
		{name: "global on two GPUs", a: limited("kind: KIND_GPU gpus: [ 0 ]", `resources [ { name: "R" global: true count: 1 } ]`),
			b: limited("kind: KIND_GPU gpus: [ 1 ]", `resources [ { name: "R" global: true count: 1 } ]`), bWaits: true, wantAvail: resourceMap{globalKey: {"R": 1}}},
		{name: "explicit count above the needs", explicit: []ratelimit.Resource{{Name: "R", Count: 2, Device: -1}},
			a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`), b: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`),
			wantAvail: resourceMap{0: {"R": 2}}},
		{name: "explicit count for the device", explicit: []ratelimit.Resource{{Name: "R", Count: 1, Device: 1}, {Name: "R", Count: 3, Device: 0}},
			a: limited("kind: KIND_GPU gpus: [ 0 ]", `resources [ { name: "R" count: 2 } ]`), b: limited("kind: KIND_GPU gpus: [ 0 ]", `resources [ { name: "R" count: 1 } ]`),
			wantAvail: resourceMap{0: {"R": 3}}},
		{name: "a repeated explicit count keeps the smaller", explicit: []ratelimit.Resource{{Name: "R", Count: 3, Device: -1}, {Name: "R", Count: 2, Device: -1}},
			a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 2 } ]`), b: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`),
			bWaits: true, wantAvail: resourceMap{0: {"R": 2}}},
		{name: "explicit global count from any device", explicit: []ratelimit.Resource{{Name: "G", Count: 2, Device: 1}},
			a: limited("kind: KIND_CPU", `resources [ { name: "G" global: true count: 1 } ]`), b: limited("kind: KIND_CPU", `resources [ { name: "G" global: true count: 1 } ]`),
			wantAvail: resourceMap{globalKey: {"G": 2}}},
		{name: "no rate_limiter uses nothing", a: limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`),
			b: "instance_group [ { kind: KIND_CPU count: 1 } ]\n", wantAvail: resourceMap{0: {"R": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rl *ratelimit.Limiter
			if !tt.off {
				rl = ratelimit.New(tt.explicit)
			}
			s, b, err := limitServer(t, rl, map[string]string{"a": tt.a, "b": tt.b})
			if err != nil {
				t.Fatal(err)
			}
			if rl != nil {
				avail := rl.Available()
				if fmt.Sprint(avail) != fmt.Sprint(tt.wantAvail) {
					t.Errorf("available %v, want %v", avail, tt.wantAvail)
				}
			}
			doneA := inferAsync(s, limitReq("a", 1, false))
			if m := startedModel(t, b); m != "a" {
				t.Fatalf("%s started, want a", m)
			}
			doneB := inferAsync(s, limitReq("b", 2, false))
			if tt.bWaits {
				notStarted(t, b)
				b.gate <- struct{}{} // a finishes and releases its resources
				answered(t, doneA)
				if m := startedModel(t, b); m != "b" {
					t.Fatalf("%s started, want b", m)
				}
				b.gate <- struct{}{}
				answered(t, doneB)
				return
			}
			if m := startedModel(t, b); m != "b" {
				t.Fatalf("%s started, want b", m)
			}
			b.gate <- struct{}{}
			b.gate <- struct{}{}
			answered(t, doneA)
			answered(t, doneB)
		})
	}
}

// TestRateLimiterLoadErrors: counts that cannot serve an instance, and a
// resource both global and per-device, fail the load in Triton's words;
// with rate limiting off the same models load.
func TestRateLimiterLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		explicit []ratelimit.Resource
		models   map[string]string
		want     string
	}{
		{name: "explicit count below the need", explicit: []ratelimit.Resource{{Name: "R", Count: 1, Device: -1}},
			models: map[string]string{"a": limited("kind: KIND_CPU", `resources [ { name: "R" count: 2 } ]`)},
			want:   `Resource count for "R" is limited to 1 which will prevent scheduling of one or more model instances, the minimum required count is 2`},
		{name: "resource not given once any is", explicit: []ratelimit.Resource{{Name: "S", Count: 4, Device: -1}},
			models: map[string]string{"a": limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`)},
			want:   `Resource count for "R" is limited to 0 which will prevent scheduling of one or more model instances, the minimum required count is 1`},
		{name: "given for another device", explicit: []ratelimit.Resource{{Name: "R", Count: 4, Device: 1}},
			models: map[string]string{"a": limited("kind: KIND_GPU gpus: [ 0 ]", `resources [ { name: "R" count: 1 } ]`)},
			want:   `Resource count for "R" is limited to 0 which`},
		{name: "global and per-device", models: map[string]string{
			"a": limited("kind: KIND_CPU", `resources [ { name: "R" global: true count: 1 } ]`),
			"b": limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`)},
			want: `Resource "R" is present as both global and device-specific resource in the model configuration.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := ratelimit.New(tt.explicit)
			s, _, err := limitServer(t, rl, tt.models)
			if err == nil {
				t.Fatal("the models loaded")
			}
			idx, _ := s.Index(context.Background(), false)
			if !strings.Contains(fmt.Sprint(idx), tt.want) {
				t.Errorf("index %+v lacks %q", idx, tt.want)
			}
			// What failed left nothing behind: the limiter's counts are
			// those of what loaded.
			for _, e := range idx {
				if e.State == StateReady {
					continue
				}
				n := rl.Instances()
				if len(tt.models) == 1 && n != 0 {
					t.Errorf("%d instances registered after the failed load", n)
				}
			}
			if _, _, err := limitServer(t, nil, tt.models); err != nil {
				t.Errorf("with rate limiting off: %v", err)
			}
		})
	}
}

// TestRateLimiterPriorityAcrossModels: instances of two models that need
// the same global resource share it by executions × priority: priority 2
// gets half the executions of priority 1 while both have work.
func TestRateLimiterPriorityAcrossModels(t *testing.T) {
	rl := ratelimit.New(nil)
	need := `resources [ { name: "R" global: true count: 1 } ]`
	s, b, err := limitServer(t, rl, map[string]string{
		"blocker": limited("kind: KIND_CPU", need),
		"one":     limited("kind: KIND_CPU", need+" priority: 1"),
		"two":     limited("kind: KIND_CPU", need+" priority: 2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	blocker := inferAsync(s, limitReq("blocker", 0, false))
	if m := startedModel(t, b); m != "blocker" {
		t.Fatalf("%s started", m)
	}
	var dones []<-chan error
	for k, model := range []string{"one", "two"} {
		for i := range n {
			dones = append(dones, inferAsync(s, limitReq(model, int32(i), false)))
			if i == 0 {
				waitFor(t, model+" waiting for the resource", func() bool { return rl.Waiting() == k+1 })
			}
		}
		waitFor(t, model+"'s requests queued", func() bool {
			mv, release, err := s.Acquire(model, LatestVersion)
			if err != nil {
				return false
			}
			defer release()
			return mv.Stats.Snapshot().Pending == n-1
		})
	}
	b.gate <- struct{}{}
	answered(t, blocker)
	var order []string
	for range n {
		order = append(order, startedModel(t, b))
		b.gate <- struct{}{}
	}
	// one's score is its executions, two's twice its: ties go to the one
	// that waited longer.
	want := strings.Fields("one two one two one one two one one two one one")
	if !slices.Equal(order, want) {
		t.Errorf("executions %v, want %v", order, want)
	}
	counts := map[string]int{}
	for _, m := range order {
		counts[m]++
	}
	if counts["one"] != 2*counts["two"] {
		t.Errorf("executions by model %v, want priority 1 twice priority 2's", counts)
	}
	for range 2*n - len(order) {
		startedModel(t, b)
		b.gate <- struct{}{}
	}
	for _, d := range dones {
		answered(t, d)
	}
}

// TestRateLimiterDynamicBatching: requests that arrive while a dynamic
// batching instance waits for its resources batch together once it runs.
func TestRateLimiterDynamicBatching(t *testing.T) {
	rl := ratelimit.New(nil)
	need := `resources [ { name: "R" global: true count: 1 } ]`
	s, b, err := limitServer(t, rl, map[string]string{
		"blocker": limited("kind: KIND_CPU", need),
		"batched": "max_batch_size: 8\ndynamic_batching { }\n" + limited("kind: KIND_CPU", need),
	})
	if err != nil {
		t.Fatal(err)
	}
	blocker := inferAsync(s, limitReq("blocker", 0, false))
	startedModel(t, b)
	var dones []<-chan error
	dones = append(dones, inferAsync(s, limitReq("batched", 1, true)))
	waitFor(t, "the batch waiting for the resource", func() bool { return rl.Waiting() == 1 })
	for i := range 5 {
		dones = append(dones, inferAsync(s, limitReq("batched", int32(i+2), true)))
	}
	waitFor(t, "the requests queued", func() bool {
		mv, release, err := s.Acquire("batched", LatestVersion)
		if err != nil {
			return false
		}
		defer release()
		return mv.Stats.Snapshot().Pending == 5
	})
	notStarted(t, b)
	b.gate <- struct{}{}
	answered(t, blocker)
	for range 2 {
		if m := startedModel(t, b); m != "batched" {
			t.Fatalf("%s started", m)
		}
		b.gate <- struct{}{}
	}
	for _, d := range dones {
		answered(t, d)
	}
	b.mu.Lock()
	rows := b.rows["batched"]
	b.mu.Unlock()
	if !slices.Equal(rows, []int{1, 5}) {
		t.Errorf("batches of %v rows, want [1 5]", rows)
	}
	// The first request waited for the resource (300 ms and more, while
	// no execution could start): queue time, as Triton counts it, not
	// compute input.
	mv, release, err := s.Acquire("batched", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	st := mv.Stats.Snapshot()
	if st.QueueUs < 300_000 || st.ComputeInputUs >= 300_000 {
		t.Errorf("queue %d µs, compute input %d µs: the wait for the resource is not queue time", st.QueueUs, st.ComputeInputUs)
	}
}

// TestRateLimiterUnloadAndReload: the default counts follow the loaded
// instances: an unload takes its needs away, a load adds them again.
func TestRateLimiterUnloadAndReload(t *testing.T) {
	rl := ratelimit.New(nil)
	s, _, err := limitServer(t, rl, map[string]string{
		"big":   limited("kind: KIND_CPU", `resources [ { name: "R" count: 3 } ]`),
		"small": limited("kind: KIND_CPU", `resources [ { name: "R" count: 1 } ]`),
	})
	if err != nil {
		t.Fatal(err)
	}
	avail := func() string { return fmt.Sprint(rl.Available()) }
	if got := avail(); got != fmt.Sprint(resourceMap{0: {"R": 3}}) {
		t.Fatalf("available %s with both loaded", got)
	}
	if err := s.Unload(context.Background(), "big"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "big's instance to leave the rate limiter", func() bool { return avail() == fmt.Sprint(resourceMap{0: {"R": 1}}) })
	if err := s.Load(context.Background(), "big", nil); err != nil {
		t.Fatal(err)
	}
	if got := avail(); got != fmt.Sprint(resourceMap{0: {"R": 3}}) {
		t.Errorf("available %s after big loaded again", got)
	}
}
