package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/core/autopilot"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/openai"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/trace"
)

// config holds every command-line setting; the option names are Triton's
// (cmd/inferd/options holds the table and the grammar).
type config struct {
	// env is the process environment, read once at start (env.go).
	env               environment
	repos             []string
	serverID          string
	httpPort          int
	httpAddress       string
	allowHTTP         bool
	reuseHTTPPort     bool
	httpThreads       int
	metricsPort       int
	metricsAddress    string
	allowMetrics      bool
	loadReportEvery   bool // --grpc-load-report-every-call
	allowCPUMetrics   bool
	allowGPUMetrics   bool
	metricsInterval   time.Duration
	pinnedPoolBytes   int64
	metricsConfig     []string
	controlMode       string
	loadModels        []string
	pollSecs          int
	cacheDir          string
	strictConfig      optionalBool
	disableAuto       bool
	exitOnError       bool
	exitTimeoutSecs   int
	strictReadiness   bool
	allowFileOverride bool // --allow-model-file-override (inferd's own)
	namespacing       bool // --model-namespacing
	allowClientShm    bool
	loadRetries       int
	// sloTargets are --model-slo's latency targets, by model.
	sloTargets        map[string]autopilot.Target
	logVerbose        int
	logInfo           bool
	logWarning        bool
	logError          bool
	logFormat         string
	logFile           string
	maxInputSize      int64
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	bodyReadTimeout   time.Duration
	bodyMinRate       int64
	backendConfig     []string
	restrictedAPI     []string
	openAIKeys        []string // --openai-api-key
	openAIKeyFiles    []string // --openai-api-key-file
	// openAIKeyset holds both, read by check (nil: no key needed).
	openAIKeyset *openai.Keys
	// restricted and grpcRestrictions are the groups of
	// --http-restricted-api and --grpc-restricted-protocol, read by check.
	restricted, grpcRestrictions map[string]protocol.Restriction
	// python is the Python backend's --backend-config, read by check.
	python            python.Options
	configName        string
	loadThreads       int
	showVersionAndBye bool

	// gRPC (triton-inference-server/server
	// docs/customization_guide/inference_protocols.md).
	allowGRPC         bool
	grpcAddress       string
	grpcPort          int
	reuseGRPCPort     bool
	grpcRestricted    []string
	grpcTLS, grpcMTLS bool
	grpcCert, grpcKey string
	grpcRootCert      string
	grpcKeepalive     time.Duration
	grpcKeepTimeout   time.Duration
	grpcPermitNoCalls bool
	grpcMinPing       time.Duration
	grpcPingStrikes   int
	grpcMaxAge        time.Duration
	grpcMaxAgeGrace   time.Duration
	grpcCompression   string // --grpc-infer-response-compression-level

	// Cloud frontends (triton-inference-server/server
	// src/command_line_parser.cc).
	allowSageMaker     bool
	sageMakerPort      int
	sageMakerSafeRange string
	sageMakerUnload    time.Duration
	allowVertex        bool
	vertexPort         int
	vertexDefaultModel string
	vertexInvoke       bool

	// logs are the run-time log settings, from the --log-* options; the
	// logger, /v2/logging and gRPC LogSettings share them.
	logs *logging.Settings
	// httpForward and grpcForward are --http-header-forward-pattern and
	// --grpc-header-forward-pattern, compiled by check (nil: off).
	httpForwardPattern, grpcForwardPattern string
	httpForward, grpcForward               *protocol.HeaderForwarder

	// traceValues and traceDeprecated are --trace-config and the
	// deprecated --trace-* flags; check reads them into tracing, and run
	// builds tracer, which every frontend shares.
	traceValues     []string
	traceDeprecated trace.Deprecated
	tracing         trace.Config
	tracer          *trace.Manager

	// regions is the client shared-memory table both frontends share
	// (--allow-client-shm=true; nil when off), built by run.
	regions *shm.Manager

	// responseCache is --cache-config (or --response-cache-byte-size).
	responseCache responseCacheConfig
	// rateLimit is --rate-limit and --rate-limit-resource.
	rateLimit rateLimitConfig

	// planned and noop are the given options that take no effect here
	// (their feature is not built yet, or they mean nothing for ONNX
	// Runtime), reported in one start-up warning.
	planned, noop []string
}

// optionalBool remembers whether it was given, so a deprecated option can
// yield to its replacement.
type optionalBool struct{ set, value bool }

// progName is the name the binary runs under (inferd or tritonserver).
func progName() string { return filepath.Base(os.Args[0]) }

// parseFlags reads the command line with the process environment as it
// is now (the tests' entry; main reads the environment once and calls
// parseCommandLine).
func parseFlags(args []string, out io.Writer) (*config, error) {
	return parseCommandLine(args, processEnv(), out)
}

// parseCommandLine reads the command line, with env for the settings
// whose defaults come from the environment; --help prints the usage to
// out and returns options.ErrHelp.
func parseCommandLine(args []string, env environment, out io.Writer) (*config, error) {
	v, err := options.Parse(args)
	if errors.Is(err, options.ErrHelp) {
		options.Usage(out, progName())
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	c := fromOptions(v)
	c.env = env
	c.planned, c.noop = v.Inert()
	if c.responseCache, err = responseCacheSettings(v); err != nil {
		return nil, err
	}
	if c.rateLimit, err = rateLimitSettings(v); err != nil {
		return nil, err
	}
	c.sloTargets = map[string]autopilot.Target{}
	for _, s := range v.List("model-slo") {
		name, t, err := autopilot.ParseFlag(s) // checked by the option's Check
		if err != nil {
			return nil, err
		}
		c.sloTargets[name] = t
	}
	c.traceSettings(v)
	c.vertexDefaults(v)
	if err := checkBuild(v, c); err != nil {
		return nil, err
	}
	if c.controlMode != "poll" {
		c.pollSecs = 0
	}
	return c, c.check()
}

// fromOptions is the table of the options that are read as they are.
func fromOptions(v *options.Values) *config {
	return &config{
		repos:              dedupe(v.List("model-repository")),
		serverID:           v.String("id"),
		httpPort:           v.Int("http-port"),
		httpAddress:        v.String("http-address"),
		allowHTTP:          v.Bool("allow-http"),
		reuseHTTPPort:      v.Bool("reuse-http-port"),
		httpThreads:        v.Int("http-thread-count"),
		metricsPort:        v.Int("metrics-port"),
		metricsAddress:     v.String("metrics-address"),
		allowMetrics:       v.Bool("allow-metrics"),
		loadReportEvery:    v.Bool("grpc-load-report-every-call"),
		allowCPUMetrics:    v.Bool("allow-cpu-metrics"),
		allowGPUMetrics:    v.Bool("allow-gpu-metrics"),
		metricsInterval:    time.Duration(v.Int("metrics-interval-ms")) * time.Millisecond,
		pinnedPoolBytes:    v.Int64("pinned-memory-pool-byte-size"),
		metricsConfig:      v.List("metrics-config"),
		controlMode:        strings.ToLower(v.String("model-control-mode")),
		loadModels:         dedupe(v.List("load-model")),
		pollSecs:           v.Int("repository-poll-secs"),
		cacheDir:           v.String("repository-cache-dir"),
		strictConfig:       optionalBool{set: v.Given("strict-model-config"), value: v.Bool("strict-model-config")},
		disableAuto:        v.Bool("disable-auto-complete-config"),
		exitOnError:        v.Bool("exit-on-error"),
		exitTimeoutSecs:    max(0, v.Int("exit-timeout-secs")),
		strictReadiness:    v.Bool("strict-readiness"),
		allowFileOverride:  v.Bool("allow-model-file-override"),
		namespacing:        v.Bool("model-namespacing"),
		allowClientShm:     v.Bool("allow-client-shm"),
		loadRetries:        v.Int("model-load-retry-count"),
		logVerbose:         v.Int("log-verbose"),
		logInfo:            v.Bool("log-info"),
		logWarning:         v.Bool("log-warning"),
		logError:           v.Bool("log-error"),
		logFormat:          v.String("log-format"),
		logFile:            v.String("log-file"),
		httpForwardPattern: v.String("http-header-forward-pattern"),
		grpcForwardPattern: v.String("grpc-header-forward-pattern"),
		maxInputSize:       v.Int64("http-max-input-size"),
		readHeaderTimeout:  v.Duration("http-read-header-timeout"),
		idleTimeout:        v.Duration("http-idle-timeout"),
		bodyReadTimeout:    v.Duration("http-body-read-timeout"),
		bodyMinRate:        v.Int64("http-body-min-rate"),
		backendConfig:      v.List("backend-config"),
		restrictedAPI:      v.List("http-restricted-api"),
		openAIKeys:         v.List("openai-api-key"),
		openAIKeyFiles:     v.List("openai-api-key-file"),
		configName:         v.String("model-config-name"),
		loadThreads:        max(1, v.Int("model-load-thread-count")),
		showVersionAndBye:  v.Bool("version"),
		allowGRPC:          v.Bool("allow-grpc"),
		grpcAddress:        v.String("grpc-address"),
		grpcPort:           v.Int("grpc-port"),
		reuseGRPCPort:      v.Bool("reuse-grpc-port"),
		grpcRestricted:     v.List("grpc-restricted-protocol"),
		grpcTLS:            v.Bool("grpc-use-ssl") || (v.Given("grpc-use-ssl-mutual") && !v.Given("grpc-use-ssl")),
		grpcMTLS:           v.Bool("grpc-use-ssl-mutual"),
		grpcCert:           v.String("grpc-server-cert"),
		grpcKey:            v.String("grpc-server-key"),
		grpcRootCert:       v.String("grpc-root-cert"),
		grpcKeepalive:      ms(v.Int("grpc-keepalive-time")),
		grpcKeepTimeout:    ms(v.Int("grpc-keepalive-timeout")),
		grpcPermitNoCalls:  v.Bool("grpc-keepalive-permit-without-calls"),
		grpcMinPing:        ms(v.Int("grpc-http2-min-recv-ping-interval-without-data")),
		grpcPingStrikes:    v.Int("grpc-http2-max-ping-strikes"),
		grpcMaxAge:         ms(v.Int("grpc-max-connection-age")),
		grpcMaxAgeGrace:    ms(v.Int("grpc-max-connection-age-grace")),
		grpcCompression:    v.String("grpc-infer-response-compression-level"),
		allowSageMaker:     v.Bool("allow-sagemaker"),
		sageMakerPort:      v.Int("sagemaker-port"),
		sageMakerSafeRange: v.String("sagemaker-safe-port-range"),
		sageMakerUnload:    v.Duration("sagemaker-unload-timeout"),
		allowVertex:        v.Bool("allow-vertex-ai"),
		vertexPort:         v.Int("vertex-ai-port"),
		vertexDefaultModel: v.String("vertex-ai-default-model"),
		vertexInvoke:       v.Bool("vertex-ai-invoke-routes"),
	}
}

// traceSettings keeps --trace-config and the deprecated --trace-* options
// for check, which reads them into tracing.
func (c *config) traceSettings(v *options.Values) {
	c.traceValues = v.List("trace-config")
	if v.Given("trace-file") {
		f := v.String("trace-file")
		c.traceDeprecated.File = &f
	}
	c.traceDeprecated.Levels = v.List("trace-level")
	for _, d := range []struct {
		name string
		dst  **int
	}{{"trace-rate", &c.traceDeprecated.Rate}, {"trace-count", &c.traceDeprecated.Count}, {"trace-log-frequency", &c.traceDeprecated.LogFrequency}} {
		if v.Given(d.name) {
			n := v.Int(d.name)
			*d.dst = &n
		}
	}
}

// vertexDefaults applies Vertex AI's environment (as Triton's Vertex
// build): AIP_MODE=PREDICTION turns the Vertex listener on and the plain
// HTTP one off unless asked, and AIP_HTTP_PORT and AIP_STORAGE_URI are
// the defaults of the port and the repository.
func (c *config) vertexDefaults(v *options.Values) {
	if c.env.get("AIP_MODE") == "PREDICTION" {
		if !v.Given("allow-vertex-ai") {
			c.allowVertex = true
		}
		if !v.Given("allow-http") {
			c.allowHTTP = false
		}
		if !v.Given("allow-grpc") {
			c.allowGRPC = false
		}
	}
	if p, err := strconv.Atoi(c.env.get("AIP_HTTP_PORT")); err == nil && !v.Given("vertex-ai-port") {
		c.vertexPort = p
	}
	if uri := c.env.get("AIP_STORAGE_URI"); len(c.repos) == 0 && uri != "" && c.allowVertex {
		c.repos = append(c.repos, uri)
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// dedupe drops repeated values, keeping the first of each (Triton keeps
// repositories and start-up models in a set).
func dedupe(vals []string) []string {
	var out []string
	for _, s := range vals {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (c *config) check() error {
	if len(c.repos) == 0 && !c.showVersionAndBye {
		return fmt.Errorf("--model-repository must be specified")
	}
	if len(c.loadModels) > 0 && c.controlMode != "explicit" {
		return fmt.Errorf("--load-model is only allowed with --model-control-mode=explicit")
	}
	for _, m := range c.loadModels {
		if m == "*" && len(c.loadModels) > 1 {
			return fmt.Errorf("--load-model=* must be the only --load-model")
		}
	}
	// Triton reads the restricted groups while parsing the command line,
	// so a bad one stops the start before any model loads.
	c.restricted, c.grpcRestrictions = map[string]protocol.Restriction{}, map[string]protocol.Restriction{}
	for _, r := range c.restrictedAPI {
		if err := protocol.ParseRestriction(c.restricted, r, "api"); err != nil {
			return fmt.Errorf("--http-restricted-api: %w", err)
		}
	}
	for _, r := range c.grpcRestricted {
		if err := protocol.ParseRestriction(c.grpcRestrictions, r, "protocol"); err != nil {
			return fmt.Errorf("--grpc-restricted-protocol: %w", err)
		}
	}
	if len(c.openAIKeys)+len(c.openAIKeyFiles) > 0 {
		// Files are re-read at most once a second, whatever the load.
		keys, err := openai.NewKeys(c.openAIKeys, c.openAIKeyFiles, time.Second, nil)
		if err != nil {
			return fmt.Errorf("--openai-api-key-file: %w", err)
		}
		c.openAIKeyset = keys
	}
	if err := c.forwarders(); err != nil {
		return err
	}
	tracing, err := trace.ParseConfig(c.traceValues, c.traceDeprecated)
	if err != nil {
		return err
	}
	c.tracing = tracing
	format, _ := logging.ParseFormat(c.logFormat) // the option's check admits only the three names
	c.logs = logging.New(c.logFile, logging.State{Info: c.logInfo, Warning: c.logWarning, Error: c.logError,
		Verbose: uint32(max(0, c.logVerbose)), Format: format})
	// Triton quotes and escapes each text line's message unless this is "0".
	c.logs.SetEscape(c.env.get("TRITON_SERVER_ESCAPE_LOG_MESSAGES") != "0")
	if _, err := c.metrics(); err != nil {
		return err
	}
	pySettings, err := c.backendSettings("python")
	if err != nil {
		return err
	}
	if c.python, err = python.Settings(pySettings); err != nil {
		return err
	}
	_, err = c.backendSettings("")
	return err
}

// forwarders compiles the header forward patterns. The headers that
// restricted APIs require are never forwarded, whatever the pattern: on
// HTTP the group's header, on gRPC its triton-grpc-protocol- key.
func (c *config) forwarders() error {
	var httpKeys, grpcKeys []string
	for _, r := range c.restricted {
		httpKeys = append(httpKeys, r.Key)
	}
	if c.openAIKeyset != nil {
		// The API key is never handed to a model.
		httpKeys = append(httpKeys, "authorization")
	}
	for _, r := range c.grpcRestrictions {
		grpcKeys = append(grpcKeys, "triton-grpc-protocol-"+r.Key)
	}
	var err error
	if c.httpForward, err = protocol.NewHeaderForwarder(c.httpForwardPattern, httpKeys...); err != nil {
		return fmt.Errorf("--http-header-forward-pattern: %w", err)
	}
	if c.grpcForward, err = protocol.NewHeaderForwarder(c.grpcForwardPattern, grpcKeys...); err != nil {
		return fmt.Errorf("--grpc-header-forward-pattern: %w", err)
	}
	return nil
}

// timeouts are the HTTP listeners' timeouts.
func (c *config) timeouts() httpapi.Timeouts {
	return httpapi.Timeouts{ReadHeader: c.readHeaderTimeout, Idle: c.idleTimeout, Body: c.bodyReadTimeout, BodyMinRate: c.bodyMinRate}
}

// metrics reads the --metrics-config settings and the polled metrics'
// options; CPU and GPU metrics are ANDed with --allow-metrics.
func (c *config) metrics() (metrics.Config, error) {
	mc := metrics.DefaultConfig()
	for _, s := range c.metricsConfig {
		if err := mc.ParseSetting(s); err != nil {
			return mc, err
		}
	}
	mc.AllowCPU = c.allowCPUMetrics && c.allowMetrics
	mc.AllowGPU = c.allowGPUMetrics && c.allowMetrics
	// Triton's switches of GPU monitoring outside its flags.
	if v, ok := c.env.lookup("CUDA_VISIBLE_DEVICES"); ok {
		mc.CUDAVisibleDevices = &v
	}
	_, mc.CPUOnly = c.env.lookup("TRITON_SERVER_CPU_ONLY")
	mc.Interval = c.metricsInterval
	mc.PinnedPoolBytes = c.pinnedPoolBytes
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

// backendSettings returns the --backend-config settings of one backend:
// the global ones (no backend name) with the backend's own on top, as in
// Triton.
func (c *config) backendSettings(backend string) (map[string]string, error) {
	global, own := map[string]string{}, map[string]string{}
	for _, s := range c.backendConfig {
		name, k, v, err := options.Setting(s)
		if err != nil {
			return nil, fmt.Errorf("--backend-config: %w", err)
		}
		switch name {
		case "":
			global[k] = v
		case backend:
			own[k] = v
		}
	}
	maps.Copy(global, own)
	return global, nil
}
