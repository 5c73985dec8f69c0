package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/sagemaker"
)

// config holds every command-line setting; the flag names are Triton's.
type config struct {
	repos             stringList
	httpPort          int
	httpAddress       string
	allowHTTP         bool
	metricsPort       int
	metricsAddress    string
	allowMetrics      bool
	metricsConfig     stringList
	controlMode       string
	loadModels        stringList
	pollSecs          int
	cacheDir          string
	strictConfig      boolFlag
	disableAuto       bool
	exitOnError       bool
	exitTimeoutSecs   int
	strictReadiness   bool
	logVerbose        int
	logInfo           bool
	logFormat         string
	maxInputSize      int64
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	bodyReadTimeout   time.Duration
	bodyMinRate       int64
	backendConfig     stringList
	restrictedAPI     stringList
	configName        string
	allowClientShm    bool
	loadThreads       int
	showVersionAndBye bool

	// Cloud frontends (platforms.md §0, §3.3, §4.2).
	allowSageMaker     bool
	sageMakerPort      int
	sageMakerSafeRange string
	sageMakerThreads   int
	sageMakerUnload    time.Duration
	allowVertex        bool
	vertexPort         int
	vertexThreads      int
	vertexDefaultModel string
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// boolFlag remembers whether it was given, so a deprecated flag can yield
// to its replacement.
type boolFlag struct {
	set, value bool
}

func (b *boolFlag) String() string { return strconv.FormatBool(b.value) }
func (b *boolFlag) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	b.set, b.value = true, x
	return nil
}
func (b *boolFlag) IsBoolFlag() bool { return true }

func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("inferd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Var(&c.repos, "model-repository", "Model repository root (a folder; repeatable). Every sub-folder is a model, as in Triton.")
	fs.Var(&c.repos, "model-store", "Alias of --model-repository.")
	fs.IntVar(&c.httpPort, "http-port", 8000, "Port of the KServe v2 HTTP API.")
	fs.StringVar(&c.httpAddress, "http-address", "0.0.0.0", "Address the HTTP API binds to.")
	fs.BoolVar(&c.allowHTTP, "allow-http", true, "Serve the HTTP API.")
	fs.IntVar(&c.metricsPort, "metrics-port", 8002, "Port of the Prometheus metrics endpoint (GET /metrics).")
	fs.StringVar(&c.metricsAddress, "metrics-address", "", "Address the metrics endpoint binds to (default: --http-address).")
	fs.BoolVar(&c.allowMetrics, "allow-metrics", true, "Serve Prometheus metrics.")
	fs.Var(&c.metricsConfig, "metrics-config", "Metrics setting <setting>=<value> (repeatable), e.g. counter_latencies=false.")
	fs.StringVar(&c.controlMode, "model-control-mode", "none", "none: load every model at start-up; poll: also apply repository changes every --repository-poll-secs; explicit: only --load-model names, then the repository API loads and unloads.")
	fs.Var(&c.loadModels, "load-model", "Model to load at start-up in explicit mode (repeatable; * loads all).")
	fs.IntVar(&c.pollSecs, "repository-poll-secs", 15, "Polling interval of poll mode, in seconds (0: never poll after start-up).")
	fs.StringVar(&c.cacheDir, "repository-cache-dir", "", "Where models of s3:// and gs:// repositories are copied (default: $TRITON_AWS_MOUNT_DIRECTORY or $TRITON_GCS_MOUNT_DIRECTORY, else <temp dir>/inferd-cache).")
	fs.Var(&c.strictConfig, "strict-model-config", "Deprecated: true turns config auto-complete off (use --disable-auto-complete-config).")
	fs.BoolVar(&c.disableAuto, "disable-auto-complete-config", false, "Require a complete config.pbtxt; do not fill inputs, outputs and max_batch_size from the ONNX model.")
	fs.BoolVar(&c.exitOnError, "exit-on-error", true, "Exit when any start-up model fails to load.")
	fs.IntVar(&c.exitTimeoutSecs, "exit-timeout-secs", 30, "On SIGTERM/SIGINT, seconds to let in-flight requests finish before exiting.")
	fs.BoolVar(&c.strictReadiness, "strict-readiness", true, "Ready only when every model version is READY (or explicitly unloaded).")
	fs.IntVar(&c.logVerbose, "log-verbose", 0, "Verbose logging level (> 0 logs debug lines).")
	fs.BoolVar(&c.logInfo, "log-info", true, "Log info lines.")
	fs.StringVar(&c.logFormat, "log-format", "default", "Log format: default (text) or json.")
	fs.Int64Var(&c.maxInputSize, "http-max-input-size", 64<<20, "Largest JSON text, JSON tensor, raw body or decompressed body accepted, in bytes; a request body is read no further (binary tensors after the JSON header excepted).")
	fs.DurationVar(&c.readHeaderTimeout, "http-read-header-timeout", httpapi.DefaultReadHeaderTimeout, "Longest time a client may take to send a request's headers, on every listener (0: no limit).")
	fs.DurationVar(&c.idleTimeout, "http-idle-timeout", httpapi.DefaultIdleTimeout, "How long a kept-alive connection may wait for its next request, on every listener (0: no limit).")
	fs.DurationVar(&c.bodyReadTimeout, "http-body-read-timeout", httpapi.DefaultBodyReadTimeout, "Longest wait for more bytes of a request body; every read that brings data restarts it, so steady uploads of any size are never cut (0: no limit).")
	fs.Int64Var(&c.bodyMinRate, "http-body-min-rate", httpapi.DefaultBodyMinRate, "Bytes per second a request body must average once --http-body-read-timeout has passed, so a client cannot hold a connection by trickling (0: no minimum).")
	fs.Var(&c.backendConfig, "backend-config", "Backend setting <backend>,<key>=<value> (repeatable): onnxruntime,library-path=...; onnxruntime,default-max-batch-size=4; onnxruntime,enable-global-threadpool=true; onnxruntime,intra_op_thread_count=N; onnxruntime,inter_op_thread_count=N.")
	fs.Var(&c.restrictedAPI, "http-restricted-api", "Restrict API categories to requests carrying a header: <category>[,<category>...]:<key>=<value> (repeatable).")
	fs.StringVar(&c.configName, "model-config-name", "", "Use <model>/configs/<name>.pbtxt when it exists instead of config.pbtxt.")
	fs.BoolVar(&c.allowClientShm, "allow-client-shm", false, "Client shared memory (not supported yet; off, as Triton's default, answers register calls with 501).")
	fs.IntVar(&c.loadThreads, "model-load-thread-count", 4, "Models loaded in parallel at start-up.")
	fs.BoolVar(&c.showVersionAndBye, "version", false, "Print the version and exit.")
	fs.Usage = func() {
		fmt.Fprintf(out, "inferd — a Triton-compatible inference server for ONNX models.\n\nUsage: inferd --model-repository=<path> [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&c.allowSageMaker, "allow-sagemaker", false, "Serve the SageMaker routes (/ping, /invocations, /models) on --sagemaker-port.")
	fs.IntVar(&c.sageMakerPort, "sagemaker-port", 8080, "Port of the SageMaker listener (address 0.0.0.0).")
	fs.StringVar(&c.sageMakerSafeRange, "sagemaker-safe-port-range", "", "<lo>-<hi>: every other listener must use a port in this range.")
	fs.IntVar(&c.sageMakerThreads, "sagemaker-thread-count", 8, "Accepted for Triton compatibility; Go serves each request on its own goroutine.")
	fs.DurationVar(&c.sageMakerUnload, "sagemaker-unload-timeout", sagemaker.DefaultUnloadTimeout, "Longest an MME unload (DELETE /models/{m}) waits for the model's requests to finish before answering; SageMaker allows 360 s.")
	vertexMode := os.Getenv("AIP_MODE") == "PREDICTION"
	fs.BoolVar(&c.allowVertex, "allow-vertex-ai", vertexMode, "Serve the Vertex AI routes (AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE) on --vertex-ai-port (default: true when AIP_MODE=PREDICTION).")
	vertexPort := 8080
	if p, err := strconv.Atoi(os.Getenv("AIP_HTTP_PORT")); err == nil {
		vertexPort = p
	}
	fs.IntVar(&c.vertexPort, "vertex-ai-port", vertexPort, "Port of the Vertex AI listener (default: AIP_HTTP_PORT, else 8080).")
	fs.IntVar(&c.vertexThreads, "vertex-ai-thread-count", 8, "Accepted for Triton compatibility; Go serves each request on its own goroutine.")
	fs.StringVar(&c.vertexDefaultModel, "vertex-ai-default-model", "", "Model the Vertex AI predict route serves (default: the only model).")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if vertexMode && !given["allow-http"] {
		// On Vertex AI only the Vertex listener serves unless asked.
		c.allowHTTP = false
	}
	if uri := os.Getenv("AIP_STORAGE_URI"); len(c.repos) == 0 && uri != "" && c.allowVertex {
		c.repos = append(c.repos, uri)
	}
	return c, c.check()
}

func (c *config) check() error {
	if len(c.repos) == 0 && !c.showVersionAndBye {
		return fmt.Errorf("--model-repository must be specified")
	}
	mode := strings.ToLower(c.controlMode)
	if len(c.loadModels) > 0 && mode != "explicit" {
		return fmt.Errorf("--load-model is only allowed with --model-control-mode=explicit")
	}
	for _, m := range c.loadModels {
		if m == "*" && len(c.loadModels) > 1 {
			return fmt.Errorf("--load-model=* must be the only --load-model")
		}
	}
	if _, err := c.metrics(); err != nil {
		return err
	}
	if c.allowClientShm {
		return fmt.Errorf("--allow-client-shm=true: client shared memory is not supported yet")
	}
	if c.maxInputSize <= 0 {
		return fmt.Errorf("--http-max-input-size must be greater than 0")
	}
	for name, d := range map[string]time.Duration{"http-read-header-timeout": c.readHeaderTimeout, "http-idle-timeout": c.idleTimeout,
		"http-body-read-timeout": c.bodyReadTimeout, "sagemaker-unload-timeout": c.sageMakerUnload} {
		if d < 0 {
			return fmt.Errorf("--%s must not be negative", name)
		}
	}
	if c.bodyMinRate < 0 {
		return fmt.Errorf("--http-body-min-rate must not be negative")
	}
	return nil
}

// timeouts are the HTTP listeners' timeouts.
func (c *config) timeouts() httpapi.Timeouts {
	return httpapi.Timeouts{ReadHeader: c.readHeaderTimeout, Idle: c.idleTimeout, Body: c.bodyReadTimeout, BodyMinRate: c.bodyMinRate}
}

// metrics reads the --metrics-config settings.
func (c *config) metrics() (metrics.Config, error) {
	mc := metrics.DefaultConfig()
	for _, s := range c.metricsConfig {
		if err := mc.ParseSetting(s); err != nil {
			return mc, err
		}
	}
	return mc, nil
}

// autoComplete resolves --disable-auto-complete-config and the deprecated
// --strict-model-config; the former wins when both are given.
func (c *config) autoComplete() bool {
	if c.disableAuto {
		return false
	}
	if c.strictConfig.set {
		return !c.strictConfig.value
	}
	return true
}

// backendSettings returns the --backend-config settings of one backend.
func (c *config) backendSettings(backend string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range c.backendConfig {
		name, kv, ok := strings.Cut(s, ",")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || k == "" {
			return nil, fmt.Errorf("--backend-config expects <backend>,<setting>=<value>, got %q", s)
		}
		if name == backend {
			out[k] = v
		}
	}
	return out, nil
}
