package onnxrt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// mlpConfig serves ob.MLP(in, hidden, layers) (input x, output y).
func mlpConfig(in, hidden int, extra string) string {
	return fmt.Sprintf(`max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: %d }
output { name: "y" data_type: TYPE_FP32 dims: %d }
%s`, in, hidden, extra)
}

const shareOn = `parameters { key: "share_session_between_instances" value { string_value: "true" } }`

// loadGroup creates the instances of one load: every spec gets the same
// *ModelConfig, as the core passes them.
func loadGroup(t *testing.T, b *Backend, v core.VersionFiles, cfg *modelconfig.ModelConfig, kinds ...modelconfig.ModelInstanceGroup_Kind) []core.BatchInstance {
	t.Helper()
	insts := make([]core.BatchInstance, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		// At once, as the core creates them (ParallelInstances): the
		// instances that arrive while the first opens the session wait.
		wg.Go(func() {
			insts[i], errs[i] = b.NewBatchInstance(context.Background(), core.InstanceSpec{
				VersionFiles: v, Name: fmt.Sprintf("%s_%d", v.ModelName, i), Kind: k, Config: cfg,
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	return insts
}

func closeAll(t *testing.T, insts []core.BatchInstance) {
	t.Helper()
	for _, in := range insts {
		if err := in.Close(); err != nil {
			t.Error(err)
		}
	}
}

func cpuKinds(n int) []modelconfig.ModelInstanceGroup_Kind {
	k := make([]modelconfig.ModelInstanceGroup_Kind, n)
	for i := range k {
		k[i] = modelconfig.ModelInstanceGroup_KIND_CPU
	}
	return k
}

// mlpInput is request r's input, distinct per request.
func mlpInput(t *testing.T, r, batch, in int) *core.Tensor {
	vals := make([]float64, batch*in)
	for i := range vals {
		vals[i] = float64((i*7+r*13)%17-8) / 8
	}
	return tensor(t, "x", ob.Float, []int64{int64(batch), int64(in)}, vals)
}

// TestSharedSessionAnswers runs concurrent requests on four instances
// sharing one session and on four with sessions of their own: the answers
// are the same, byte for byte.
func TestSharedSessionAnswers(t *testing.T) {
	const in, hidden, layers, requests = 32, 48, 3, 24
	v := version(t, "mlp", ob.Must(ob.MLP(in, hidden, layers)))
	base := testBackend.sessions.liveSessions()

	shared := loadGroup(t, testBackend, v, config(t, mlpConfig(in, hidden, shareOn)), cpuKinds(4)...)
	defer closeAll(t, shared)
	if got := testBackend.sessions.liveSessions() - base; got != 1 {
		t.Fatalf("4 sharing instances opened %d sessions, want 1", got)
	}
	separate := loadGroup(t, testBackend, v, config(t, mlpConfig(in, hidden, "")), cpuKinds(4)...)
	defer closeAll(t, separate)
	if got := testBackend.sessions.liveSessions() - base; got != 5 {
		t.Fatalf("then 4 separate instances: %d sessions live, want 5", got)
	}

	run := func(insts []core.BatchInstance) [][]byte {
		out := make([][]byte, requests)
		errs := make([]error, requests)
		var wg sync.WaitGroup
		for i := range insts {
			wg.Go(func() { // one goroutine per instance: Execute is serial per instance
				for r := i; r < requests; r += len(insts) {
					b := &core.ConcatBatch{Inputs: []*core.Tensor{mlpInput(t, r, 1+r%4, in)}, Outputs: []string{"y"}}
					if errs[r] = insts[i].Execute(context.Background(), b); errs[r] == nil {
						out[r] = b.Results[0].Data
					}
				}
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("request %d: %v", r, err)
			}
		}
		return out
	}
	for round := range 3 {
		got, want := run(shared), run(separate)
		for r := range got {
			if len(got[r]) != (1+r%4)*hidden*4 || !bytes.Equal(got[r], want[r]) {
				t.Fatalf("round %d request %d: shared %d bytes, separate %d bytes, equal %v", round, r, len(got[r]), len(want[r]), bytes.Equal(got[r], want[r]))
			}
		}
	}
}

// TestSharedSessionLifetime follows the core's hot reload: the new copy's
// instances open a fresh session beside the old copy's, and closing each
// copy's instances frees its session with the last of them.
func TestSharedSessionLifetime(t *testing.T) {
	v := version(t, "mlp", ob.Must(ob.MLP(8, 8, 2)))
	base := testBackend.sessions.liveSessions()
	live := func(want int, when string) {
		t.Helper()
		if got := testBackend.sessions.liveSessions() - base; got != want {
			t.Fatalf("%s: %d sessions live, want %d", when, got, want)
		}
	}
	old := loadGroup(t, testBackend, v, config(t, mlpConfig(8, 8, shareOn)), cpuKinds(3)...)
	live(1, "loaded")
	fresh := loadGroup(t, testBackend, v, config(t, mlpConfig(8, 8, shareOn)), cpuKinds(3)...)
	live(2, "reloaded beside the serving copy")
	closeAll(t, old[:2])
	live(2, "two of the old copy's three closed")
	execute(t, old[2], []string{"y"}, mlpInput(t, 0, 1, 8)) // the last holder still runs
	closeAll(t, old[2:])
	live(1, "old copy unloaded")
	closeAll(t, fresh)
	live(0, "unloaded")
	if n := len(testBackend.sessions.shared); n != 0 {
		t.Errorf("%d shared entries left", n)
	}
}

// TestSharedSessionFallback: instances of one load on different kinds do
// not share one session; each kind shares its own, and the log says why.
func TestSharedSessionFallback(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	b, err := New(Options{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := version(t, "mlp", ob.Must(ob.MLP(8, 8, 2)))
	cpu, model := modelconfig.ModelInstanceGroup_KIND_CPU, modelconfig.ModelInstanceGroup_KIND_MODEL
	insts := loadGroup(t, b, v, config(t, mlpConfig(8, 8, shareOn)), cpu, cpu, model, model)
	if got := b.sessions.liveSessions(); got != 2 {
		t.Errorf("2 CPU + 2 MODEL instances opened %d sessions, want 2", got)
	}
	want := execute(t, insts[0], []string{"y"}, mlpInput(t, 1, 2, 8))[0].Data
	if got := execute(t, insts[3], []string{"y"}, mlpInput(t, 1, 2, 8))[0].Data; !bytes.Equal(got, want) {
		t.Error("the two sessions answer differently")
	}
	closeAll(t, insts)
	if got := b.sessions.liveSessions(); got != 0 {
		t.Errorf("%d sessions live after close", got)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	for _, s := range []string{"share_session_between_instances does not apply across devices", "opens its own session", "bound to its execution provider's device"} {
		if strings.Count(text, s) != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", s, strings.Count(text, s), text)
		}
	}
	if n := strings.Count(text, "instance shares the ONNX Runtime session"); n != 2 {
		t.Errorf("%d instances logged sharing, want 2:\n%s", n, text)
	}
}

// TestSharedSessionBadParam: the parameter is a Triton bool.
func TestSharedSessionBadParam(t *testing.T) {
	v := version(t, "mlp", ob.Must(ob.MLP(8, 8, 1)))
	cfg := config(t, mlpConfig(8, 8, `parameters { key: "share_session_between_instances" value { string_value: "maybe" } }`))
	_, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_CPU)
	if err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Fatalf("err = %v, want a refusal of %q", err, "maybe")
	}
}

// TestSharedSessionOpenFails: a session that fails to open fails every
// instance waiting for it and leaves nothing behind.
func TestSharedSessionOpenFails(t *testing.T) {
	var tab sessionTable
	key := sessionKey{path: "p"}
	log := slog.New(slog.DiscardHandler)
	opening, fail := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		_, _, err := tab.acquire(context.Background(), key, "a", log, func() (*ort.DynamicAdvancedSession, error) {
			close(opening)
			<-fail
			return nil, fmt.Errorf("no such file")
		})
		errs <- err
	}()
	<-opening
	go func() {
		_, _, err := tab.acquire(context.Background(), key, "b", log, func() (*ort.DynamicAdvancedSession, error) {
			t.Error("a second open while the first is under way")
			return nil, nil
		})
		errs <- err
	}()
	for {
		tab.mu.Lock()
		refs := tab.shared[key].refs
		tab.mu.Unlock()
		if refs == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(fail)
	for range 2 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("err = %v, want the open's failure", err)
		}
	}
	if len(tab.shared) != 0 || tab.live != 0 {
		t.Errorf("left %d entries, %d live", len(tab.shared), tab.live)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSharedSessionGPU: KIND_GPU instances on one device share one session
// beside the CPU instances' own; without the CUDA provider every GPU
// instance fails with the provider's error and no session is left.
func TestSharedSessionGPU(t *testing.T) {
	v := version(t, "mlp", ob.Must(ob.MLP(8, 8, 2)))
	cfg := config(t, mlpConfig(8, 8, shareOn))
	gpu, cpu := modelconfig.ModelInstanceGroup_KIND_GPU, modelconfig.ModelInstanceGroup_KIND_CPU
	base := testBackend.sessions.liveSessions()
	if !cudaProviderInstalled() {
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = testBackend.NewBatchInstance(context.Background(), core.InstanceSpec{
					VersionFiles: v, Name: fmt.Sprintf("mlp_%d", i), Kind: gpu, Config: cfg,
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "needs the ONNX Runtime CUDA execution provider") {
				t.Errorf("instance %d: %v, want the provider's error", i, err)
			}
		}
		if got := testBackend.sessions.liveSessions() - base; got != 0 {
			t.Errorf("%d sessions left", got)
		}
		return
	}
	insts := loadGroup(t, testBackend, v, cfg, gpu, gpu, cpu, cpu)
	defer closeAll(t, insts)
	if got := testBackend.sessions.liveSessions() - base; got != 2 {
		t.Errorf("2 GPU + 2 CPU instances opened %d sessions, want 2", got)
	}
	want := execute(t, insts[2], []string{"y"}, mlpInput(t, 3, 2, 8))[0].Data
	for _, in := range insts[:2] {
		got := decode(t, ob.Float, execute(t, in, []string{"y"}, mlpInput(t, 3, 2, 8))[0])
		exp := decode(t, ob.Float, &core.Tensor{Name: "y", DataType: core.TypeFP32, Data: want})
		for i := range got {
			if d := got[i] - exp[i]; d > 1e-4 || d < -1e-4 {
				t.Fatalf("GPU y[%d] = %v, CPU %v", i, got[i], exp[i])
			}
		}
	}
}

// TestSharedSessionServer goes through the core's lifecycle: a load opens
// one session for three instances, a hot reload opens the new copy's and
// frees the old one's once retired, an unload frees the last.
func TestSharedSessionServer(t *testing.T) {
	root := t.TempDir()
	v := core.VersionFiles{ModelName: "mlp", Version: 1, ModelDir: filepath.Join(root, "mlp"), VersionDir: filepath.Join(root, "mlp", "1")}
	if err := ob.WriteFile(filepath.Join(v.VersionDir, "model.onnx"), ob.Must(ob.MLP(8, 8, 2))); err != nil {
		t.Fatal(err)
	}
	writeConfig := func(comment string) {
		cfg := "platform: \"onnxruntime_onnx\"\n" + mlpConfig(8, 8, shareOn) + "\ninstance_group [ { kind: KIND_CPU count: 3 } ]\n# " + comment + "\n"
		if err := os.WriteFile(filepath.Join(v.ModelDir, "config.pbtxt"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("first")
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	s := core.NewServer(core.Options{Repos: repos, Backends: []core.Backend{testBackend}, ControlMode: core.ModeExplicit,
		Batching: dynamic.Batchers{}, Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	base := testBackend.sessions.liveSessions()
	waitLive := func(want int, when string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); testBackend.sessions.liveSessions()-base != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d sessions live, want %d", when, testBackend.sessions.liveSessions()-base, want)
			}
		}
	}
	infer := func() {
		t.Helper()
		req := &core.InferRequest{ModelName: "mlp", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{mlpInput(t, 2, 1, 8)}}
		if resp, err := s.Infer(context.Background(), req); err != nil || len(resp.Outputs) != 1 || len(resp.Outputs[0].Data) != 8*4 {
			t.Fatalf("infer: %v %+v", err, resp)
		}
	}
	// session is the model's shared session now.
	session := func() *ort.DynamicAdvancedSession {
		testBackend.sessions.mu.Lock()
		defer testBackend.sessions.mu.Unlock()
		for k, e := range testBackend.sessions.shared {
			if k.path == filepath.Join(v.VersionDir, "model.onnx") {
				return e.session
			}
		}
		return nil
	}
	if err := s.Load(context.Background(), "mlp", nil); err != nil {
		t.Fatal(err)
	}
	waitLive(1, "loaded")
	first := session()
	infer()
	writeConfig("second")
	if err := s.Load(context.Background(), "mlp", nil); err != nil {
		t.Fatal(err)
	}
	waitLive(1, "reloaded, the old copy retired")
	if second := session(); first == nil || second == nil || second == first {
		t.Fatalf("sessions %p then %p: want a new one for the reloaded copy", first, second)
	}
	infer()
	if err := s.Unload(context.Background(), "mlp"); err != nil {
		t.Fatal(err)
	}
	waitLive(0, "unloaded")
}
