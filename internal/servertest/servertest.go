// Package servertest starts the inference core with the real ONNX Runtime
// backend over Go-built models, for the tests of the API server and the
// packages built on it (platform frontends, the load tool); they put
// httpapi.New over the core themselves, so that httpapi's own tests can
// use this package too. It needs the ONNX Runtime library (`make ort`, or
// ORT_LIB_PATH).
//
// Beside the core it holds what those tests share: in-Go backends
// (Identity, and Repeat, a decoupled one), ensemble configs over `simple`,
// a model.py that echoes its request parameters, Python (a python3 with
// numpy, or the test fails), and client helpers that post bodies, count
// allocations and list a process's children.
//
// It reads the process environment itself (ORT_LIB_PATH, INFERD_PYTHON):
// its variables configure the test harness, not the server
// (docs/environment.md).
package servertest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/autopilot"
	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/ensemble"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo"
)

// Model is one model folder: its config and the ONNX file of each version
// (version "1" when Versions is empty).
type Model struct {
	Config   string
	ONNX     []byte
	Versions []string
}

// WriteRepo writes models into a fresh temporary repository root.
func WriteRepo(t testing.TB, models map[string]Model) string {
	t.Helper()
	root := t.TempDir()
	for name, m := range models {
		WriteModel(t, filepath.Join(root, name), m)
	}
	return root
}

// WriteModel writes one model folder.
func WriteModel(t testing.TB, dir string, m Model) {
	t.Helper()
	versions := m.Versions
	if len(versions) == 0 {
		versions = []string{"1"}
	}
	for _, v := range versions {
		Must(t, os.MkdirAll(filepath.Join(dir, v), 0o755))
		if m.ONNX != nil { // an ensemble's version folder stays empty
			Must(t, os.WriteFile(filepath.Join(dir, v, "model.onnx"), m.ONNX, 0o644))
		}
	}
	Must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(m.Config), 0o644))
}

// Options say how to start.
type Options struct {
	Repo    string           // repository root; a fresh empty one when ""
	Mode    core.ControlMode // ModeNone loads every model
	Startup []string         // --load-model names in explicit mode
	// AllowFailures keeps going when some start-up model fails.
	AllowFailures bool
	// Backends are served beside ONNX Runtime, Identity and Repeat (the
	// Python backend, in its tests).
	Backends []core.Backend
	// Logger receives the core's log; discarded when nil.
	Logger *slog.Logger
	// NoAutoComplete is --disable-auto-complete-config.
	NoAutoComplete bool
	// Repos are more roots after Repo; Namespacing is --model-namespacing.
	Repos       []string
	Namespacing bool
	// ResponseCache is the server's response cache (--cache-config).
	ResponseCache cache.Store
	// GPUs are the CUDA devices KIND_GPU groups may use (none: such a
	// group fails to load, as on a host without a GPU).
	GPUs []int32
	// NoFileOverrides is --allow-model-file-override=false.
	NoFileOverrides bool
	// Autopilot tunes the models with a latency target (docs/autopilot.md);
	// none when nil.
	Autopilot *autopilot.Pilot
}

// Start runs the core over o.Repo with the ONNX Runtime, Identity and Repeat
// backends; it stops when the test ends. Logs are discarded.
func Start(t testing.TB, o Options) *core.Server {
	t.Helper()
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		t.Fatalf("%v (run `make ort` or set ORT_LIB_PATH)", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, DefaultMaxBatchSize: 4, Logger: log})
	Must(t, err)
	if o.Repo == "" {
		o.Repo = t.TempDir()
	}
	repos, err := repo.OpenAll(context.Background(), append([]string{o.Repo}, o.Repos...))
	Must(t, err)
	var observers core.ObserverFactory
	var pilot core.Autopilot
	if o.Autopilot != nil {
		observers, pilot = o.Autopilot.Observers(nil), o.Autopilot
	}
	srv := core.NewServer(core.Options{
		Repos: repos, Backends: append([]core.Backend{backend, Identity{}, Repeat{}}, o.Backends...), ControlMode: o.Mode, StartupModels: o.Startup,
		AutoComplete: !o.NoAutoComplete, StrictReadiness: true, Logger: log, Namespacing: o.Namespacing,
		ResponseCache: o.ResponseCache, GPUs: o.GPUs, NoFileOverrides: o.NoFileOverrides,
		Ensembles: ensemble.Scheduling{},
		Sequences: sequence.Batchers{},
		Batching:  dynamic.Batchers{},
		Observers: observers, Autopilot: pilot,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		_ = backend.Close()
	})
	if err := srv.Start(context.Background()); err != nil && !o.AllowFailures {
		t.Fatal(err)
	}
	return srv
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WaitCancelled waits until the latest version of model on srv has counted
// one request as cancelled (an abandoned stream or call), failing the test
// after d.
func WaitCancelled(t testing.TB, srv *core.Server, model string, d time.Duration) {
	t.Helper()
	mv, release, err := srv.Acquire(model, core.LatestVersion)
	Must(t, err)
	defer release()
	deadline := time.Now().Add(d)
	for mv.Stats.Snapshot().Failures[core.FailCanceled] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("model %s: the abandoned request was not counted as cancelled", model)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
