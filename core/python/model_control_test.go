package python_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo"
)

// within runs f and fails the test when it has not returned after d (a
// deadlock); deadlines are generous, the machine is slow and shared.
func within[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

type inferResult struct {
	resp *core.InferResponse
	err  error
}

func inferAll(e *env, req *core.InferRequest) inferResult {
	resp, err := e.infer(req)
	return inferResult{resp, err}
}

// waitUnloaded waits until every version of name shows UNAVAILABLE
// "unloaded" in the index.
func waitUnloaded(t *testing.T, srv *core.Server, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		entries, err := srv.Index(context.Background(), false)
		servertest.Must(t, err)
		var states []core.IndexEntry
		unloaded := false
		for _, e := range entries {
			if e.Name == name {
				states = append(states, e)
				unloaded = e.State == core.StateUnavailable && e.Reason == "unloaded"
			}
		}
		if unloaded && len(states) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never unloaded: %+v", name, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSelfUnload: a model.py whose execute unloads itself (or an ensemble
// running it) gets its answer: as Triton's, pb_utils.unload_model returns
// without waiting for the unload, whose in-flight requests include the
// caller's own. The model then ends UNAVAILABLE and loads again.
func TestSelfUnload(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit}, "self_unload")
	ens := filepath.Join(e.root, "self_ens")
	servertest.Must(t, os.MkdirAll(filepath.Join(ens, "1"), 0o755))
	servertest.Must(t, os.WriteFile(filepath.Join(ens, "config.pbtxt"), []byte(`name: "self_ens"
platform: "ensemble"
max_batch_size: 0
input [ { name: "TARGET" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "self_unload" model_version: -1 input_map { key: "TARGET" value: "TARGET" } output_map { key: "OUT" value: "OUT" } } ] }
`), 0o644))
	const long = 90 * time.Second
	load := func(name string) {
		t.Helper()
		servertest.Must(t, within(t, long, "load "+name, func() error { return e.srv.Load(context.Background(), name, nil) }))
		if !e.srv.ModelReady(name, core.LatestVersion) {
			t.Fatalf("%s is not ready after its load", name)
		}
	}
	call := func(model, target string) {
		t.Helper()
		r := within(t, long, "a request to "+model+" unloading "+target, func() inferResult {
			return inferAll(e, &core.InferRequest{ModelName: model, Inputs: []*core.Tensor{bytesTensor("TARGET", target)}})
		})
		servertest.Must(t, r.err)
		if got := strings1(t, output(r.resp, "OUT")); got[0] != "unloaded "+target {
			t.Fatalf("%s unloading %s answered %q", model, target, got)
		}
	}

	for _, tc := range []struct {
		model, target string
		unloaded      []string // unloaded by the call
		ready         []string // still ready after it
	}{
		{"self_unload", "self_unload", []string{"self_unload"}, nil},
		{"self_ens", "self_ens", []string{"self_ens"}, []string{"self_unload"}},
		// Unloading the composing model takes the ensemble with it.
		{"self_ens", "self_unload", []string{"self_unload", "self_ens"}, nil},
	} {
		load(tc.model)
		call(tc.model, tc.target)
		for _, n := range tc.unloaded {
			waitUnloaded(t, e.srv, n)
		}
		for _, n := range tc.ready {
			if !e.srv.ModelReady(n, core.LatestVersion) {
				t.Errorf("%s unloading %s: %s is not ready", tc.model, tc.target, n)
			}
		}
		// Later loads and unloads of the model do not hang.
		load(tc.model)
		servertest.Must(t, within(t, long, "unload "+tc.model, func() error { return e.srv.Unload(context.Background(), tc.model) }))
	}
}

// TestReadinessDoesNotBlockLifecycle: the server's readiness (strict, so
// every model's is_ready() is asked) asks the workers outside the model
// table's lock, so while a slow is_ready() runs, a load or unload of
// another model and the inferences queued behind it go on.
func TestReadinessDoesNotBlockLifecycle(t *testing.T) {
	e := start(t, options{}, "slow_ready", "add_sub")
	servertest.WriteModel(t, filepath.Join(e.root, "simple"), servertest.Simple("simple"))
	const long = 60 * time.Second
	servertest.Must(t, within(t, long, "load simple", func() error { return e.srv.Load(context.Background(), "simple", nil) }))
	dir := filepath.Join(e.root, "slow_ready")
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644))
	ready := make(chan bool, 1)
	go func() { ready <- e.srv.Ready() }()
	for deadline := time.Now().Add(long); !exists("busy"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("is_ready() was never asked")
		}
	}
	// is_ready() is held now: an unload (a writer of the model table), an
	// inference queued behind it and a load must all get through.
	servertest.Must(t, within(t, long, "unload simple", func() error { return e.srv.Unload(context.Background(), "simple") }))
	r := within(t, long, "an inference", func() inferResult {
		return inferAll(e, &core.InferRequest{ModelName: "add_sub",
			Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 4}, 1, 2, 3, 4), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}})
	})
	servertest.Must(t, r.err)
	if floats(output(r.resp, "OUTPUT0"))[3] != 5 {
		t.Fatalf("add_sub during a readiness check: %+v", r.resp)
	}
	servertest.Must(t, within(t, long, "load simple", func() error { return e.srv.Load(context.Background(), "simple", nil) }))
	if exists("finished") {
		t.Fatal("the unload, the inference and the load waited for is_ready()")
	}
	servertest.Must(t, os.Remove(filepath.Join(dir, "hold")))
	// The held check has given up after its 5 s (not ready) or been
	// answered; either way it returns, and the next check is answered.
	within(t, long, "the held readiness check", func() bool { return <-ready })
	for deadline := time.Now().Add(long); !e.srv.Ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server is not ready once is_ready() answers")
		}
	}
}

// TestOverrideFolderLivesWithVersion: a model.py loaded through the load
// API's files keeps its folder while a version loaded from it lives, so a
// worker killed with SIGKILL restarts from it; the unload removes it.
func TestOverrideFolderLivesWithVersion(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := start(t, options{mode: core.ModeExplicit})
	src, err := os.ReadFile(filepath.Join("testdata", "models", "identity", "1", "model.py"))
	servertest.Must(t, err)
	ov := &core.LoadOverride{
		ConfigJSON: `{"backend":"python","max_batch_size":8,` +
			`"input":[{"name":"INPUT0","data_type":"TYPE_FP32","dims":[-1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[-1]}]}`,
		Files: map[string][]byte{"1/model.py": src},
	}
	const long = 60 * time.Second
	servertest.Must(t, within(t, long, "the override load", func() error { return e.srv.Load(context.Background(), "ovpy", ov) }))
	folders := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "inferd-*", "model-ovpy-*"))
		return dirs
	}
	if dirs := folders(); len(dirs) != 1 {
		t.Fatalf("override folders while the version is loaded: %v", dirs)
	}
	infer := func() inferResult {
		return inferAll(e, &core.InferRequest{ModelName: "ovpy", Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 2}, 7, 8)}})
	}
	servertest.Must(t, infer().err)
	pids := workerPIDs()
	if len(pids) != 1 {
		t.Fatalf("%d workers for one instance", len(pids))
	}
	servertest.Must(t, syscall.Kill(pids[0], syscall.SIGKILL))
	for deadline := time.Now().Add(long); ; time.Sleep(50 * time.Millisecond) {
		r := infer()
		if r.err == nil && floats(output(r.resp, "OUTPUT0"))[1] == 8 && e.srv.ModelReady("ovpy", core.LatestVersion) && !slices.Contains(workerPIDs(), pids[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed worker never came back: %v\n%s", r.err, e.log.String())
		}
	}
	servertest.Must(t, within(t, long, "the unload", func() error { return e.srv.Unload(context.Background(), "ovpy") }))
	if dirs := folders(); len(dirs) != 0 {
		t.Fatalf("override folders after the unload: %v", dirs)
	}
}

// TestLoadModelFilesRefused: with Options.NoFileOverrides
// (--allow-model-file-override=false) pb_utils.load_model with files fails
// in the model with the refusal, and loads nothing; without it, it loads.
func TestLoadModelFilesRefused(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		root := copyModels(t, "file_loader")
		logs := &logBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		b := python.New(python.Options{Executable: servertest.Python(t), Logger: log})
		t.Cleanup(func() { _ = b.Close() })
		repos, err := repo.OpenAll(context.Background(), []string{root})
		servertest.Must(t, err)
		srv := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit,
			StartupModels: []string{"file_loader"}, AutoComplete: true, Logger: log, NoFileOverrides: refuse})
		t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
		servertest.Must(t, srv.Start(context.Background()))
		resp, err := srv.Infer(context.Background(), &core.InferRequest{ModelName: "file_loader", ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{bytesTensor("TARGET", "uploaded")}})
		servertest.Must(t, err)
		want := "loaded"
		if refuse {
			want = "error: load failed for model 'uploaded': loading model files from the load request ('file:' parameters) is disabled by --allow-model-file-override=false"
		}
		if got := strings1(t, output(resp, "OUT"))[0]; got != want {
			t.Fatalf("refuse=%v: the model's load answered %q, want %q\n%s", refuse, got, want, logs.String())
		}
		if ready := srv.ModelReady("uploaded", core.LatestVersion); ready == refuse {
			t.Fatalf("refuse=%v: the uploaded model's readiness is %v", refuse, ready)
		}
	}
}
