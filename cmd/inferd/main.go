// Command inferd serves Triton model repositories (ONNX, Python and
// ensemble models, from local folders, s3://, gs:// or as://) over the KServe v2
// HTTP and gRPC APIs, with Prometheus metrics; the same binary is the
// SageMaker (`inferd serve`), Vertex AI and AWS Lambda container. Build tags
// give smaller per-cloud binaries from the same source (builds.go).
// `inferd perf` is a load tool for any KServe v2 server, over HTTP or gRPC.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/autopilot"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/ensemble"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/openai"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/serve"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/shm/cudaipc"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/credfile"
	"github.com/inferd/inferd/repo/tempdir"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "perf" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := perfMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// The environment is read here, once (env.go), and handed down.
	env := processEnv()
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "tritonserver" {
		// Triton images run their arguments (`docker run <image>
		// tritonserver ...`, KServe's args: [tritonserver, ...]); here the
		// binary is the entrypoint, so the word is dropped.
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "serve" {
		// SageMaker runs `docker run <image> serve`: its environment
		// becomes flags, as Triton's serve script does
		// (triton-inference-server/server docker/sagemaker/serve).
		flags, exports, err := sageMakerServeArgs(env)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for k, v := range exports {
			// Into the process environment too: the Python workers
			// inherit it (workerEnviron).
			_ = os.Setenv(k, v)
			env[k] = v
		}
		args = append(flags, args[1:]...)
	}
	cfg, err := parseCommandLine(args, env, os.Stderr)
	if errors.Is(err, options.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", progName(), err)
		os.Exit(2)
	}
	if cfg.showVersionAndBye {
		fmt.Println("inferd", version)
		return
	}
	log, closeLog, err := newLogger(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName(), err)
		os.Exit(2)
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = run(ctx, cfg, log, nil)
	// The process's temporary folder goes with it, whatever its servers
	// left there (repo/tempdir).
	if rerr := tempdir.RemoveOwn(); rerr != nil {
		log.Warn("failed to remove the temporary folder", "err", rerr)
	}
	if err != nil {
		if cfg.logFile != "" {
			log.Error("exiting", "err", err)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName(), err)
		closeLog()
		os.Exit(1)
	}
}

// newLogger builds the logger the options ask for: --log-file (appended)
// or stderr, obeying cfg.logs (platforms/logging): --log-format
// default/ISO8601 (text) or json; --log-info, --log-warning and
// --log-error switch their levels independently, as in Triton, and
// --log-verbose > 0 adds debug lines. /v2/logging and gRPC LogSettings
// change all but the file while the server runs.
func newLogger(cfg *config) (*slog.Logger, func(), error) {
	var w io.Writer = os.Stderr
	closeLog := func() {}
	if cfg.logFile != "" {
		f, err := os.OpenFile(cfg.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closeLog = f, func() { _ = f.Close() }
	}
	return slog.New(cfg.logs.Handler(w)), closeLog, nil
}

// run starts the server and blocks until ctx ends (a signal) or one of its
// long-lived parts fails. ready, when non-nil, receives the bound
// addresses once serving.
//
// Every long-lived part is an actor of one run group (serve.Group), as in
// Prometheus' cmd/prometheus/main.go, started in the order below. The stop
// runs them down in the reverse order, each after the one before has
// stopped, which is tritonserver's (triton-inference-server/server
// src/main.cc): the server marks itself exiting, the listeners drain, the
// models unload, the backends stop, the traces flush.
func run(ctx context.Context, cfg *config, log *slog.Logger, ready func(addrs map[string]string)) error {
	started := time.Now()
	if len(cfg.planned) > 0 || len(cfg.noop) > 0 {
		// One line: what the launch line asks for that does not happen.
		log.Warn("options accepted but not in effect", "planned", strings.Join(cfg.planned, ", "), "no_op", strings.Join(cfg.noop, ", "))
	}
	if cfg.strictConfig.set {
		log.Warn("--strict-model-config is deprecated; use --disable-auto-complete-config")
	}
	// What inferd processes that died left in the temporary folder goes;
	// live processes' folders stay (repo/tempdir).
	if removed, err := tempdir.Sweep(); err != nil {
		log.Warn("failed to remove the temporary folders of inferd processes that are gone", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed the temporary folders of inferd processes that are gone", "folders", removed)
	}
	mode, err := core.ParseControlMode(cfg.controlMode)
	if err != nil {
		return err
	}
	// Listener conflicts fail the start before any model loads.
	specs, err := listeners(cfg)
	if err != nil {
		return err
	}
	// One deadline for the whole stop, started when it begins (a signal,
	// a failed actor or a failed start-up step): the listeners' drains,
	// the models' unloads, the workers' finalize and the trace flush
	// share it, and past it the workers are killed and the process
	// exits. As in tritonserver, the endpoints' stop uses part of
	// --exit-timeout-secs and the server's stop gets what is left.
	stop := serve.NewDeadline(time.Duration(cfg.exitTimeoutSecs) * time.Second)
	defer stop.Release()
	// ctx now also ends when an actor fails, so the models' load gives up
	// when a listener serving during it (Vertex AI's) dies.
	g, ctx := serve.NewGroup(ctx, stop, log)

	// Traces: stopped last, once the models' unload has ended every
	// traced request; the trace files close and the spans flush.
	if cfg.tracer, err = trace.New(cfg.tracing, log); err != nil {
		return err
	}
	g.Go(serve.OnStop("traces", logStopError(log, "closing the traces", cfg.tracer.Close)))

	// Client shared memory: one region table for HTTP and gRPC, as
	// Triton's one SharedMemoryManager. CUDA regions open where the CUDA
	// runtime and a device are found; elsewhere they are refused as
	// Triton's CPU-only build refuses them.
	if cfg.allowClientShm {
		var device shm.Device
		if rt, err := cudaipc.Load(log); err != nil {
			log.Info("CUDA shared memory regions are refused", "reason", err)
		} else {
			device = rt
			log.Info("CUDA shared memory regions are served", "devices", rt.Devices())
		}
		cfg.regions = shm.NewManager(device)
		// Backends read and write regions in place, a truncated object
		// failing the request instead of killing the server.
		if err := cfg.regions.InstallGuard(); err != nil {
			return g.Stop(err)
		}
	}

	// GPU metrics: NVML's start (about 20 ms on a GPU host) runs beside
	// ONNX Runtime's load below, not between it and the models' load.
	mcfg, err := cfg.metrics()
	if err != nil {
		return g.Stop(err)
	}
	mcfg = mcfg.PrefetchGPUs()

	// Backends: stopped once no model uses them; the Python workers
	// still running at the deadline are killed, with their children.
	srv, custom, closeBackend, ortLoaded, err := newCore(ctx, cfg, mcfg, mode, log)
	if err != nil {
		return g.Stop(err)
	}
	g.Go(serve.OnStop("backends", logStopError(log, "stopping the backends", closeBackend)))

	// Models: unloaded once no listener takes requests; as tritonserver,
	// models still unloading at the deadline make the exit a failure.
	g.Go(serve.OnStop("models", func(ctx context.Context) error {
		log.Info("stopped serving; unloading models")
		if err := srv.Shutdown(ctx); err != nil {
			return fmt.Errorf("failed to stop server: %w", err)
		}
		return nil
	}))

	loads := loadReporter(cfg, custom, log)
	api := newAPI(cfg, srv, loads, log)
	metricsHandler := metrics.NewHandler(srv, mcfg, custom...)
	// Metrics polls (CPU, pinned memory): fresh until the metrics
	// listener has drained.
	if cfg.allowMetrics {
		g.Go(serve.Loop("metrics polls", func(ctx context.Context) { metricsHandler.Run(ctx, log) }))
	}

	// Vertex AI's listener: bound before the models load, so its
	// liveness probe passes during long loads; health reads 400 until
	// Resolve.
	addrs := map[string]string{}
	var resolveVertex func() error
	if cfg.allowVertex {
		spec := specFor(specs, "Vertex AI")
		var actor serve.Actor
		if resolveVertex, actor, addrs[spec.service], err = newVertex(cfg, spec, srv, api, metricsHandler, log); err != nil {
			return g.Stop(err)
		}
		g.Go(actor)
	}

	// The models' load: a start-up step, not an actor.
	if err := srv.Start(ctx); err != nil {
		if cfg.exitOnError {
			return g.Stop(err)
		}
		log.Error("some models failed to load; serving the others (--exit-on-error=false)", "err", err)
		if errors.Is(err, repo.ErrUnreachable) {
			// Repository retry: loads the models of the roots that did
			// not answer, until they do or the stop begins.
			g.Go(serve.Loop("repository retry", srv.RetryUnreachable))
		}
	}
	// ONNX Runtime loads while the repository is read (newCore); a
	// library that fails fails the start even where no ONNX model asked.
	if err := ortLoaded(ctx); err != nil {
		return g.Stop(err)
	}
	if resolveVertex != nil {
		if err := resolveVertex(); err != nil {
			return g.Stop(err)
		}
	}

	// The frontends: Lambda's runtime loop, or the listeners, bound once
	// the models have loaded; stopped after the exiting mark, each
	// draining its in-flight requests.
	exiting := []func(){api.SetExiting}
	lambda := cfg.env.get("AWS_LAMBDA_RUNTIME_API") != ""
	if lambda {
		g.Go(lambdaActor(api, log))
	} else {
		for _, spec := range specs {
			if spec.service == "Vertex AI" {
				continue // serving since before the load
			}
			actor, addr, mark, err := newListener(cfg, spec, srv, api, loads, metricsHandler, log)
			if err != nil {
				return g.Stop(err)
			}
			if mark != nil {
				exiting = append(exiting, mark)
			}
			g.Go(actor)
			addrs[spec.service] = addr
		}
	}

	// Repository poll: stopped first of the workers, so no model loads
	// while the server drains. Triton: 0 in poll mode means never poll
	// after start-up.
	if mode == core.ModePoll && cfg.pollSecs > 0 {
		interval := time.Duration(cfg.pollSecs) * time.Second
		g.Go(serve.Loop("poll", func(ctx context.Context) { srv.PollEvery(ctx, interval) }))
	}

	// Exiting mark: stopped first, it begins the stop: health and
	// readiness fail and new inferences are refused while the requests
	// in flight finish. The live sequences go on over the listeners still
	// open, as in tritonserver's exit, until they end or the deadline
	// passes (core.Server.Stop; docs/sequence-batching.md).
	g.Go(serve.OnStop("exiting", func(ctx context.Context) error {
		for _, mark := range exiting {
			mark()
		}
		if err := srv.Stop(ctx); err != nil {
			return fmt.Errorf("failed to stop server: %w", err)
		}
		return nil
	}))

	if lambda {
		// No sockets: the runtime loop feeds events to the same v2
		// router.
		log.Info("serving AWS Lambda events", "models", len(srv.ReadyVersions("")), "init", time.Since(started).Round(time.Millisecond))
	} else {
		var attrs []any
		for _, spec := range specs {
			attrs = append(attrs, strings.ToLower(strings.ReplaceAll(spec.service, " ", "_")), addrs[spec.service])
		}
		log.Info("serving", append(attrs, "models", len(srv.ReadyVersions("")))...)
		if ready != nil {
			ready(addrs)
		}
	}
	return g.Wait()
}

// logStopError wraps an actor's stop whose failure is logged, not a
// failure of the exit.
func logStopError(log *slog.Logger, msg string, stop func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := stop(ctx); err != nil {
			log.Error(msg, "err", err)
		}
		return nil
	}
}

// storeOpener opens the store of one remote root (repo.OpenOptions.Stores).
type storeOpener = func(context.Context, string) (repo.Store, error)

// cloudCreds is TRITON_CLOUD_CREDENTIAL_PATH, read on the first cloud
// root so a server of local roots never needs it.
type cloudCreds struct{ file *credfile.Lazy }

// entry loads the file and returns it with the label of root's entry in
// section, or Triton's error when no entry matches.
func (c *cloudCreds) entry(section, root string, prefix func(*credfile.File, string) (string, bool)) (*credfile.File, string, error) {
	f, err := c.file.Get()
	if err != nil {
		return nil, "", fmt.Errorf("TRITON_CLOUD_CREDENTIAL_PATH: %w", err)
	}
	p, ok := prefix(f, root)
	if !ok {
		// Triton's wording first, then which file and section.
		return nil, "", fmt.Errorf("%s (no %q key of credential file %s is a prefix of it)", "Cannot match credential for path "+root, section, f.Path())
	}
	return f, fmt.Sprintf("credential file %s entry %q", f.Path(), p), nil
}

// repoOptions wires the stores this build has (store_*.go: S3, GCS,
// Azure Blob) and the local cache of their models, dir (see
// openRepoCache). A scheme the build leaves out is refused earlier, when
// the command line is read (checkBuild).
func repoOptions(cfg *config, dir string, log *slog.Logger) repo.OpenOptions {
	// With TRITON_CLOUD_CREDENTIAL_PATH only the file's entries are used.
	var creds *cloudCreds
	if path := cfg.env.get("TRITON_CLOUD_CREDENTIAL_PATH"); path != "" {
		creds = &cloudCreds{file: credfile.NewLazy(path)}
	}
	stores := map[string]storeOpener{}
	for scheme, open := range map[string]storeOpener{
		"s3": s3Store(cfg, log, creds),
		"gs": gcsStore(cfg, log, creds),
		"as": asStore(cfg, log, creds),
	} {
		if open != nil {
			stores[scheme] = open
		}
	}
	return repo.OpenOptions{
		CacheDir: dir,
		Logger:   log,
		// Without --exit-on-error a storage outage at start-up must not
		// keep the other repositories from serving.
		Lenient: !cfg.exitOnError,
		Stores:  stores,
	}
}

// onnxruntimeOptions reads --backend-config=onnxruntime,... settings.
func onnxruntimeOptions(settings map[string]string, log *slog.Logger) (onnxrt.Options, error) {
	opts := onnxrt.Options{DefaultMaxBatchSize: 4, Logger: log}
	for k, v := range settings {
		var err error
		switch k {
		case "library-path":
			opts.LibraryPath, err = filepath.Abs(v)
		case "default-max-batch-size":
			opts.DefaultMaxBatchSize, err = strconv.Atoi(v)
		case "enable-global-threadpool":
			opts.EnableGlobalThreadpool, err = strconv.ParseBool(v)
		case "intra_op_thread_count":
			opts.IntraOpThreads, err = strconv.Atoi(v)
		case "inter_op_thread_count":
			opts.InterOpThreads, err = strconv.Atoi(v)
		default:
			log.Warn("ignoring unknown onnxruntime backend setting", "setting", k)
		}
		if err != nil {
			return opts, fmt.Errorf("--backend-config=onnxruntime,%s=%s: %w", k, v, err)
		}
	}
	return opts, nil
}

// newCore builds the ONNX Runtime backend, opens the repositories and
// creates the core (nothing loads yet); closeBackend stops the backends
// within its context's deadline (the Python workers still running past it
// are killed, with their children) and frees them.
//
// mcfg holds the metrics settings, whose latency observers the core
// feeds; custom are the backends' own metrics (Python models' custom
// metrics). ONNX Runtime loads in the background, from here until the
// first ONNX model needs it; ortLoaded waits for it and returns its error.
func newCore(ctx context.Context, cfg *config, mcfg metrics.Config, mode core.ControlMode, log *slog.Logger) (srv *core.Server, custom []prometheus.Collector, closeBackend func(context.Context) error, ortLoaded func(context.Context) error, err error) {
	ortSettings, err := cfg.backendSettings("onnxruntime")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ortOpts, err := onnxruntimeOptions(ortSettings, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	lib, err := onnxrt.Locate(ortOpts.LibraryPath, cfg.env.get(onnxrt.LibraryEnv))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ortOpts.LibraryPath, ortOpts.Background = lib, true
	ortBackend, err := onnxrt.New(ortOpts)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if state := ortPrestart(); state != "" {
		log.Debug("ONNX Runtime's load began at process start (prestart.go)", "state", state)
	}
	pyOpts := cfg.python
	pyOpts.LogVerbose, pyOpts.Logger = cfg.logVerbose, log
	pyOpts.Verbose = func() int { return int(cfg.logs.Verbose()) }
	pyOpts.Environ = workerEnviron
	// Nothing starts until a Python model loads.
	pyBackend := python.New(pyOpts)
	closeBackend = func(ctx context.Context) error {
		return errors.Join(pyBackend.Shutdown(ctx), pyBackend.Close(), ortBackend.Close())
	}
	// The remote models' copies go as the models unload; the folders the
	// server made for them go once the backends stop, after the unload.
	cache, err := openRepoCache(cfg)
	if err != nil {
		_ = closeBackend(context.Background())
		return nil, nil, nil, nil, err
	}
	closeBackends := closeBackend
	closeBackend = func(ctx context.Context) error { return errors.Join(closeBackends(ctx), cache.clean()) }
	repos, err := repoOptions(cfg, cache.path, log).OpenAll(ctx, cfg.repos)
	if err != nil {
		_ = closeBackend(context.Background())
		return nil, nil, nil, nil, err
	}
	// Latency summaries and the first-response histogram observe each
	// request from the moment a version loads.
	var observers core.ObserverFactory
	if cfg.allowMetrics {
		observers = mcfg.Observers(log)
	}
	// The autopilot counts the latencies of the versions with a target
	// beside the metrics' observers (docs/autopilot.md).
	pilot := autopilot.New(autopilot.Options{Targets: cfg.sloTargets, Logger: log})
	observers = pilot.Observers(observers)
	respCache, cacheMetrics, err := newResponseCache(ctx, cfg.responseCache, cfg.env, log)
	if err != nil {
		_ = closeBackend(context.Background())
		return nil, nil, nil, nil, err
	}
	if respCache != nil {
		closeWithoutCache := closeBackend
		closeBackend = func(ctx context.Context) error { return errors.Join(closeWithoutCache(ctx), respCache.Close()) }
	}
	return core.NewServer(core.Options{
		Repos:           repos,
		Backends:        []core.Backend{ortBackend, pyBackend},
		ControlMode:     mode,
		StartupModels:   cfg.loadModels,
		AutoComplete:    cfg.autoComplete(),
		ConfigName:      cfg.configName,
		StrictReadiness: cfg.strictReadiness,
		NoFileOverrides: !cfg.allowFileOverride,
		Namespacing:     cfg.namespacing,
		GPUs:            usableGPUs(lib, cfg.env, log),
		LoadThreads:     cfg.loadThreads,
		LoadRetries:     cfg.loadRetries,
		Logger:          log,
		Observers:       observers,
		ResponseCache:   respCache,
		RateLimiter:     cfg.rateLimit.limiter,
		Ensembles:       ensemble.Scheduling{},
		Sequences:       sequence.Batchers{},
		Batching:        dynamic.Batchers{},
		Autopilot:       pilot,
	}), append([]prometheus.Collector{pyBackend}, cacheMetrics...), closeBackend, ortBackend.Ready, nil
}

// newAPI builds the base v2 API server every frontend goes through.
// The OpenAI and TEI routes (platforms/openai) are mounted on its router,
// so they are served wherever the v2 routes are.
func newAPI(cfg *config, srv *core.Server, loads *orca.Reporter, log *slog.Logger) *httpapi.Server {
	api := httpapi.New(srv, httpapi.Options{MaxInputSize: cfg.maxInputSize, Restricted: cfg.restricted, ServerID: cfg.serverID,
		Workers: cfg.httpThreads, Logger: log, Logs: cfg.logs, HeaderForward: cfg.httpForward, LoadReports: loads, Trace: cfg.tracer,
		SharedMemory: cfg.regions})
	openai.New(api, openai.Options{Keys: cfg.openAIKeyset, Logger: log}).Mount(api.Router())
	return api
}

// loadReporter answers endpoint-load-metrics-format (ORCA load reports),
// which Triton ties to the metrics: nil with --allow-metrics=false. The
// KV-cache family comes from the backends' custom metrics.
func loadReporter(cfg *config, custom []prometheus.Collector, log *slog.Logger) *orca.Reporter {
	if !cfg.allowMetrics {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(custom...)
	return orca.New(orca.Options{Metrics: reg, Logger: log, TrailerOnlyWhenAsked: !cfg.loadReportEvery})
}

// specFor returns the listener of one service from the plan.
func specFor(specs []listenSpec, service string) listenSpec {
	for _, s := range specs {
		if s.service == service {
			return s
		}
	}
	return listenSpec{service: service}
}
