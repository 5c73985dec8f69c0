// Package python is Triton's Python backend for inferd: a model.py with a
// TritonPythonModel class runs unchanged in one worker process per
// instance, with inferd's own triton_python_backend_utils module
// (the API of triton-inference-server/python_backend README.md). The module and the worker script are embedded and
// written out when the first Python model loads. With FORK_INSTANCES the
// workers of a model's CPU instances are forked from one that ran
// initialize once (fork.go).
//
// Each execution goes to the worker as execute()'s list of requests, one per
// ExecRequest, and the model's responses come back as ExecResponses.
//
// Sequences need nothing of their own here: the core's sequence batcher
// hands an ExecRequest's control inputs and implicit state as inputs after the
// configured ones and lists the state outputs among the requested ones, so
// they travel as any tensor; the correlation id and flags travel with each
// request (request.correlation_id(), request.flags()).
package python

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
	"github.com/inferd/inferd/repo/tempdir"
)

//go:embed shim/*.py
var shim embed.FS

// Options configure the backend (--backend-config=python,<key>=<value>).
type Options struct {
	// Executable is the interpreter (python-executable, an inferd
	// extension); empty means python3 on PATH. A model's
	// EXECUTION_ENV_PATH overrides it.
	Executable string
	// StubTimeout bounds a worker's start, and its finalize when its
	// instance closes: it is killed then (stub-timeout-seconds, 30 s).
	StubTimeout time.Duration
	// ArenaBytes is each direction's share of a worker's shared-memory
	// arena for large tensors (tensor-arena-byte-size, an inferd
	// extension; 64 MiB by default, 0 for none: every tensor then goes
	// through the socket). Pages are only used as tensors fill them.
	ArenaBytes int
	// KeepDead leaves a worker that dies dead, its instance not ready
	// until the model is reloaded, as in Triton
	// (restart-dead-workers=false). By default a new worker takes its
	// place (restart-dead-workers=true, an inferd extension).
	KeepDead bool
	// LogVerbose is --log-verbose: Logger.log_verbose shows from 1.
	LogVerbose int
	// Verbose, when set, gives the verbose level as it is now (/v2/logging
	// and LogSettings change it at run time); workers learn it with each
	// execute. Without it LogVerbose holds.
	Verbose func() int
	// Environ gives the environment each worker starts from (KEY=value
	// entries), asked at each worker's start; its PYTHONPATH, PATH and
	// LD_LIBRARY_PATH are extended, not replaced. The binary hands down
	// the process's (cmd/inferd env.go). Nil is the process environment
	// at the worker's start, as exec.Cmd inherits it without Env.
	Environ func() []string
	Logger  *slog.Logger
}

// Settings reads the python --backend-config settings. Triton's
// shared-memory settings are accepted and have no effect (inferd's
// transport is a socket).
func Settings(settings map[string]string) (Options, error) {
	o := Options{StubTimeout: 30 * time.Second, ArenaBytes: DefaultArenaBytes}
	for k, v := range settings {
		switch k {
		case "python-executable":
			o.Executable = v
		case "stub-timeout-seconds":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("--backend-config=python,stub-timeout-seconds=%s: must be a whole number of seconds above 0", v)
			}
			o.StubTimeout = time.Duration(n) * time.Second
		case "tensor-arena-byte-size":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return o, fmt.Errorf("--backend-config=python,tensor-arena-byte-size=%s: must be a byte count", v)
			}
			o.ArenaBytes = n
		case "restart-dead-workers":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, fmt.Errorf("--backend-config=python,restart-dead-workers=%s: must be true or false", v)
			}
			o.KeepDead = !b
		case "thread-pool-size":
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				return o, fmt.Errorf("--backend-config=python,thread-pool-size=%s: must be at least 1", v)
			}
		case "shm-default-byte-size", "shm-growth-byte-size", "shm-message-queue-size", "shm-region-prefix-name", "default-max-batch-size":
		}
	}
	return o, nil
}

// DefaultArenaBytes is the default per-direction arena size.
const DefaultArenaBytes = 64 << 20

// Backend serves `backend: "python"` models.
type Backend struct {
	opts Options
	log  *slog.Logger

	once   sync.Once
	dir    string // the written shim, or "" until the first load
	dirErr error
	// life ends when the backend shuts down: restarts and starts under
	// way stop.
	life     context.Context
	end      context.CancelFunc
	mu       sync.Mutex
	closing  bool                          // Shutdown began: no worker starts
	workers  map[*worker]bool              // live workers, reaped on Close
	restarts map[instanceKey]*restartCount // restarts per loaded instance name
	packs    map[string]unpacked           // EXECUTION_ENV_PATH archives, by path
	metrics  *customMetrics                // models' custom metrics (Collect)
	// zygotes are the FORK_INSTANCES zygotes (fork.go), one per loaded
	// model version, keyed by that load's configuration.
	zygotes map[*modelconfig.ModelConfig]*zygote
}

// New builds the backend; it starts nothing until a Python model loads.
func New(opts Options) *Backend {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StubTimeout <= 0 {
		opts.StubTimeout = 30 * time.Second
	}
	life, end := context.WithCancel(context.Background())
	return &Backend{opts: opts, log: opts.Logger, life: life, end: end, workers: map[*worker]bool{}, restarts: map[instanceKey]*restartCount{}, metrics: newCustomMetrics(), packs: map[string]unpacked{},
		zygotes: map[*modelconfig.ModelConfig]*zygote{}}
}

// closeGrace is how long Close lets workers finalize.
const closeGrace = 5 * time.Second

// errClosing refuses a worker start once the backend shuts down.
var errClosing = errors.New("python backend: shutting down")

// Name implements core.Backend.
func (b *Backend) Name() string { return modelconfig.BackendPython }

// Shutdown stops the backend: from now on no worker starts or restarts;
// every live worker is asked to finalize, all at once, and those still
// running when ctx ends are killed with their children. It returns soon
// after ctx ends, whatever a finalize does.
func (b *Backend) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	ws := make([]*worker, 0, len(b.workers))
	for w := range b.workers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	b.end()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var killed []string
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !w.stopBy(ctx) {
				mu.Lock()
				killed = append(killed, w.name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(killed) > 0 {
		slices.Sort(killed)
		return fmt.Errorf("python backend: killed the workers of %s, which had not finalized: %w", strings.Join(killed, ", "), ctx.Err())
	}
	return nil
}

// Close stops every worker still running (Shutdown, with a few seconds to
// finalize), unless Shutdown has run already (the process's exit deadline
// has been spent on it), and removes the written module.
func (b *Backend) Close() error {
	b.mu.Lock()
	shut := b.closing
	b.mu.Unlock()
	var err error
	if !shut {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		err = b.Shutdown(ctx)
		cancel()
	}
	if b.dir != "" {
		err = errors.Join(err, os.RemoveAll(b.dir))
	}
	return err
}

// shimDir writes the module and the worker script once, under the
// process's temporary folder (repo/tempdir), which the next start sweeps
// should this process die before Close removes it.
func (b *Backend) shimDir() (string, error) {
	b.once.Do(func() {
		dir, err := tempdir.Make("python-")
		if err != nil {
			b.dirErr = fmt.Errorf("python backend: %w", err)
			return
		}
		entries, _ := shim.ReadDir("shim")
		for _, e := range entries {
			name := e.Name()
			data, _ := shim.ReadFile("shim/" + name)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				b.dirErr = fmt.Errorf("python backend: %w", err)
				return
			}
		}
		b.dir = dir
	})
	return b.dir, b.dirErr
}

// modelFile is the version folder's code file (default_model_filename or
// model.py, joined to the version folder as Triton's python backend does).
// The name must lie inside the version folder (modelfile.Locate: links are
// followed, as Triton does, and a load override's own names were confined
// after links too by the core) and end at a regular file: a name such as
// "../../x.py" fails the load instead of the worker importing it.
func modelFile(files core.VersionFiles, cfg *modelconfig.ModelConfig) (string, error) {
	name := cfg.GetDefaultModelFilename()
	if name == "" {
		name = "model.py"
	}
	p, err := modelfile.LocateFile(files.VersionDir, name)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, modelfile.ErrOutside), errors.Is(err, modelfile.ErrNotRegular):
		return "", core.Errorf(core.CodeInvalidArg, "%v", &modelfile.FieldError{Field: fmt.Sprintf("model '%s' default_model_filename", files.ModelName), Path: name, Err: err})
	}
	return "", core.Errorf(core.CodeInternal, "Python model file not found in '%s'", filepath.Join(files.VersionDir, name))
}

// start starts one worker for model files, as instance.
func (b *Backend) start(ctx context.Context, files core.VersionFiles, cfg *modelconfig.ModelConfig, instance string, handle func(*worker, string, frameIn)) (*worker, error) {
	return b.startProc(ctx, files, cfg, instance, handle, b.opts.ArenaBytes)
}

// startProc is start with an arena of arena bytes per direction (0: none;
// a zygote serves no requests).
func (b *Backend) startProc(ctx context.Context, files core.VersionFiles, cfg *modelconfig.ModelConfig, instance string, handle func(*worker, string, frameIn), arena int) (*worker, error) {
	if err := checkParameters(cfg); err != nil {
		return nil, err
	}
	if _, err := modelFile(files, cfg); err != nil {
		b.log.Error("Python model file refused", "model", files.ModelName, "err", err)
		return nil, err
	}
	dir, err := b.shimDir()
	if err != nil {
		return nil, err
	}
	inherited := b.environ()
	python, extra, err := b.interpreter(files, cfg, inherited)
	if err != nil {
		return nil, err
	}
	env := append(inherited, extra...)
	env = append(env, "PYTHONUNBUFFERED=1", "PYTHONPATH="+joinPath(dir, getenv(inherited, "PYTHONPATH")))
	// A start under way when the backend shuts down ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	w, err := startWorker(ctx, procSpec{handle: handle, arena: arena, instance: instance, python: python, script: filepath.Join(dir, "inferd_python_worker.py"),
		env: env, timeout: b.opts.StubTimeout, log: b.log.With("model", files.ModelName, "instance", instance)})
	if err != nil {
		return nil, err
	}
	if err := b.track(w); err != nil {
		return nil, err
	}
	return w, nil
}

// track counts w among the live workers (Shutdown stops them) until it
// exits; once the backend shuts down it kills w and refuses it.
func (b *Backend) track(w *worker) error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		w.kill()
		return errClosing
	}
	b.workers[w] = true
	b.mu.Unlock()
	go func() {
		<-w.exited
		b.mu.Lock()
		delete(b.workers, w)
		b.mu.Unlock()
		b.metrics.drop(w)
	}()
	return nil
}

// environ is the environment a worker starts from (Options.Environ).
func (b *Backend) environ() []string {
	if b.opts.Environ == nil {
		return os.Environ()
	}
	return slices.Clone(b.opts.Environ())
}

// getenv is os.Getenv over env: the first entry of key wins, as in the
// process environment.
func getenv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + string(os.PathListSeparator) + rest
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// checkParameters validates the config parameters the backend reads.
func checkParameters(cfg *modelconfig.ModelConfig) error {
	if p, ok := cfg.GetParameters()["FORCE_CPU_ONLY_INPUT_TENSORS"]; ok {
		if v := p.GetStringValue(); v != "yes" && v != "no" {
			return core.Errorf(core.CodeUnsupported, "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: %s'", v)
		}
	}
	_, err := forkRequested(cfg)
	return err
}

// interpreter picks the Python to run (inferd's rule; Triton's
// EXECUTION_ENV_PATH is described in triton-inference-server/python_backend
// README.md, "Creating Custom Execution Environments"): the
// model's EXECUTION_ENV_PATH, else the backend's executable, else python3
// on PATH. It returns the environment additions an environment needs.
func (b *Backend) interpreter(files core.VersionFiles, cfg *modelconfig.ModelConfig, inherited []string) (string, []string, error) {
	if p, ok := cfg.GetParameters()["EXECUTION_ENV_PATH"]; ok && p.GetStringValue() != "" {
		// A load override may name only what the repository's own config
		// names, or a path inside the model folder (the core's
		// checkOverride); the repository's config may name any path on
		// the host, as in Triton.
		env := modelfile.ExpandModelDir(p.GetStringValue(), files.ModelDir)
		if strings.HasSuffix(env, ".tar.gz") || strings.HasSuffix(env, ".tgz") {
			dir, err := b.unpack(env)
			if err != nil {
				return "", nil, err
			}
			env = dir
		}
		if !fileExists(filepath.Join(env, "bin", "activate")) {
			return "", nil, core.Errorf(core.CodeInternal, "Path %s/bin/activate does not exist. The Python environment should contain an 'activate' script.", env)
		}
		python := filepath.Join(env, "bin", "python3")
		if !fileExists(python) {
			python = filepath.Join(env, "bin", "python")
		}
		return python, []string{
			"PATH=" + joinPath(filepath.Join(env, "bin"), getenv(inherited, "PATH")),
			"LD_LIBRARY_PATH=" + joinPath(filepath.Join(env, "lib"), getenv(inherited, "LD_LIBRARY_PATH")),
			"VIRTUAL_ENV=" + env, "CONDA_PREFIX=" + env,
		}, nil
	}
	if b.opts.Executable != "" {
		return b.opts.Executable, nil, nil
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", nil, core.Errorf(core.CodeInternal, "no Python interpreter: python3 is not on PATH (set --backend-config=python,python-executable=<path>)")
	}
	return python, nil, nil
}

// AutoComplete implements core.Backend: a throw-away worker runs the
// model's auto_complete_config, if it has one (triton-inference-server/
// python_backend README.md, "auto_complete_config").
func (b *Backend) AutoComplete(ctx context.Context, files core.VersionFiles, cfg *modelconfig.ModelConfig) error {
	w, err := b.start(ctx, files, cfg, files.ModelName+"_auto_complete", nil)
	if err != nil {
		return err
	}
	defer w.stop(b.opts.StubTimeout)
	js, err := modelconfig.MarshalJSON(cfg)
	if err != nil {
		return err
	}
	file, err := modelFile(files, cfg)
	if err != nil {
		return err
	}
	reply, err := w.call(ctx, "auto_complete", map[string]any{
		"config": string(js), "model_file": file, "model_version": strconv.FormatInt(files.Version, 10),
	}, nil)
	if err != nil {
		return err
	}
	var r struct {
		Config string `json:"config"`
		Error  string `json:"error"`
	}
	if err := decode(reply, &r); err != nil {
		return err
	}
	if r.Error != "" {
		return core.Errorf(core.CodeInternal, "%s", r.Error)
	}
	completed, err := modelconfig.ParseJSON([]byte(r.Config))
	if err != nil {
		return core.Errorf(core.CodeInternal, "auto_complete_config of model '%s' returned a configuration that does not parse: %v", files.ModelName, err)
	}
	cfg.Reset()
	mergeConfig(cfg, completed)
	return nil
}

// NewInstance implements core.Backend: a worker for the instance, its
// model imported and initialized, in the order of Triton's stub
// (triton-inference-server/python_backend src/pb_stub.cc).
func (b *Backend) NewInstance(ctx context.Context, spec core.InstanceSpec) (core.Instance, error) {
	in := &instance{b: b, spec: spec, name: spec.Name, server: spec.Server, model: spec.ModelName,
		decoupled: spec.Config.GetModelTransactionPolicy().GetDecoupled(), open: map[int64]*openRequest{},
		supervised: make(chan struct{})}
	if err := checkParameters(spec.Config); err != nil {
		return nil, err
	}
	in.zyg = b.zygoteFor(spec)
	w, err := in.spawn(ctx)
	if err != nil {
		if in.zyg != nil {
			b.releaseZygote(in.zyg)
		}
		return nil, err
	}
	in.w = w
	in.life, in.end = context.WithCancel(b.life)
	b.trackRestarts(in.key())
	go in.supervise(w)
	return in, nil
}

// spawn starts a worker for the instance and initializes its model: a
// fork of its model's zygote with FORK_INSTANCES (fork.go), else a fresh
// process.
func (in *instance) spawn(ctx context.Context) (*worker, error) {
	if in.zyg != nil {
		w, err := in.zyg.fork(ctx, in)
		if !errors.Is(err, errForkRefused) {
			return w, err
		}
	}
	w, err := in.b.start(ctx, in.spec.VersionFiles, in.spec.Config, in.spec.Name, in.handle)
	if err != nil {
		return nil, err
	}
	if _, err := in.initialize(ctx, w, false); err != nil {
		return nil, err
	}
	return w, nil
}

// initialize imports the model in w and runs its initialize with the
// instance's args; a zygote (FORK_INSTANCES) then says which threads the
// model left running. A worker that fails is stopped.
func (in *instance) initialize(ctx context.Context, w *worker, zygote bool) ([]string, error) {
	b, spec := in.b, in.spec
	js, err := modelconfig.MarshalJSON(spec.Config)
	if err != nil {
		w.stop(time.Second)
		return nil, err
	}
	kind := strings.TrimPrefix(spec.Kind.String(), "KIND_")
	args := map[string]string{
		"model_config": string(js), "model_instance_kind": kind, "model_instance_name": spec.Name,
		"model_instance_device_id": strconv.Itoa(int(spec.DeviceID)), "model_repository": spec.ModelDir,
		"model_version": strconv.FormatInt(spec.Version, 10), "model_name": spec.ModelName,
	}
	file, err := modelFile(spec.VersionFiles, spec.Config)
	if err != nil {
		w.stop(time.Second)
		return nil, err
	}
	header := map[string]any{
		"args": args, "model_file": file, "model_version": strconv.FormatInt(spec.Version, 10),
		"decoupled": in.decoupled, "log_verbose": b.verbose(),
	}
	if zygote {
		header["zygote"] = true
	}
	reply, err := w.call(ctx, "init", header, nil)
	if err != nil {
		w.stop(time.Second)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, errUnhealthy(spec.Name)
	}
	var r struct {
		Error      string   `json:"error"`
		HasIsReady bool     `json:"has_is_ready"`
		Threads    []string `json:"threads"`
	}
	if err := decode(reply, &r); err != nil {
		w.stop(time.Second)
		return nil, err
	}
	if r.Error != "" {
		w.stop(b.opts.StubTimeout)
		b.log.Error("Python model failed to initialize", "model", spec.ModelName, "instance", spec.Name, "err", r.Error)
		return nil, core.Errorf(core.CodeInternal, "%s", lastLine(r.Error))
	}
	w.hasIsReady = r.HasIsReady
	return r.Threads, nil
}

// lastLine is a Python error's last line: the exception and its message.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// verbose is the verbose level now.
func (b *Backend) verbose() int {
	if b.opts.Verbose != nil {
		return b.opts.Verbose()
	}
	return b.opts.LogVerbose
}
