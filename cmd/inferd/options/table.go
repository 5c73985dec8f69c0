package options

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inferd/inferd/core/autopilot"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/sagemaker"
)

var timeParseDuration = time.ParseDuration

// Features an option can wait for (the issue that makes it real).
const (
	featStream = "decoupled responses"
)

// Why an option has no meaning here.
const (
	noCUDAPool   = "ONNX Runtime's CUDA provider allocates its own device memory"
	noPinned     = "no pinned host pool (reported as nv_pinned_memory_pool_total_bytes only)"
	noBackendDir = "backends are built into the binary"
	noRepoAgent  = "repository agents are built into the binary: checksum; a model naming another fails to load"
	noBufferMgr  = "no buffer-manager threads"
	noHostPolicy = "no host policies"
	noComputeCap = "ONNX Runtime checks the GPU itself"
	noPeerAccess = "no CUDA peer access between GPUs is set up"
	noGPULimit   = "no per-GPU load limit"
	noThreads    = "Go serves each request on its own goroutine"
	noPool       = "Go's allocator and sync.Pool size themselves"
	noGRPCKnob   = "grpc-go has no such setting"
)

// All returns every option, in Triton's help order within each group.
func All() []*Option {
	return []*Option{
		{Name: "help", Group: "", Kind: None, Usage: "Print usage."},

		{Name: "id", Group: "Server", Kind: String, Default: "triton", Usage: "Identifier for this server (the \"name\" of the server metadata)."},
		{Name: "exit-timeout-secs", Group: "Server", Kind: Int, Default: "30", Usage: "On SIGTERM/SIGINT, seconds to let in-flight requests finish before exiting."},
		{Name: "version", Group: "Server", Kind: None, Inferd: true, Usage: "Print the version and exit."},

		{Name: "log-verbose", Group: "Logging", Kind: IntBool, Default: "0", Usage: "Verbose logging level; > 0 logs debug lines (true is 1, false 0)."},
		{Name: "log-info", Group: "Logging", Kind: Bool, Default: "true", Usage: "Log info lines."},
		{Name: "log-warning", Group: "Logging", Kind: Bool, Default: "true", Usage: "Log warning lines."},
		{Name: "log-error", Group: "Logging", Kind: Bool, Default: "true", Usage: "Log error lines."},
		{Name: "log-format", Group: "Logging", Kind: String, Default: "default", Check: oneOf(false, "default", "ISO8601", "json"),
			Usage: "Log format: default, ISO8601 (Triton's), or json (inferd's structured lines)."},
		{Name: "log-file", Group: "Logging", Kind: String, Usage: "Append the log to this file instead of the console."},

		{Name: "model-store", Group: "Model Repository", Kind: String, Repeat: true, Alias: "model-repository", Usage: "Equivalent to --model-repository."},
		{Name: "model-repository", Group: "Model Repository", Kind: String, Repeat: true,
			Usage: "Model repository root: a folder, s3://bucket/path, gs://bucket/path or as://account/container/path (repeatable). Every sub-folder is a model."},
		{Name: "exit-on-error", Group: "Model Repository", Kind: Bool, Default: "true", Usage: "Exit when any start-up model fails to load."},
		{Name: "disable-auto-complete-config", Group: "Model Repository", Kind: None,
			Usage: "Require a complete config.pbtxt; do not fill inputs, outputs and max_batch_size from the ONNX model."},
		{Name: "strict-readiness", Group: "Model Repository", Kind: Bool, Default: "true", Usage: "Ready only when every model version is READY (or explicitly unloaded)."},
		{Name: "model-control-mode", Group: "Model Repository", Kind: String, Default: "none", Check: oneOf(true, "none", "poll", "explicit"),
			Usage: "none: load every model at start-up; poll: also apply repository changes every --repository-poll-secs; explicit: only --load-model names, then the repository API loads and unloads."},
		{Name: "repository-poll-secs", Group: "Model Repository", Kind: Int, Default: "15", Usage: "Polling interval of poll mode, in seconds (0: never poll after start-up)."},
		{Name: "load-model", Group: "Model Repository", Kind: String, Repeat: true, Usage: "Model to load at start-up in explicit mode (repeatable; * loads all)."},
		{Name: "model-config-name", Group: "Model Repository", Kind: String, Check: nonEmpty, Usage: "Use <model>/configs/<name>.pbtxt when it exists instead of config.pbtxt."},
		{Name: "model-load-thread-count", Group: "Model Repository", Kind: Int, Default: "4", Usage: "Models loaded in parallel at start-up."},
		{Name: "model-load-retry-count", Group: "Model Repository", Kind: Int, Default: "0", Check: atLeast(0), Usage: "Times to retry a model version whose load fails."},
		{Name: "model-slo", Group: "Model Repository", Kind: String, Repeat: true, Inferd: true, Label: "<model>,p99_ms=<ms>", Check: modelSLO,
			Usage: "Latency target of a model with dynamic batching, which inferd then tunes while it serves (repeatable; wins over the config's slo_p99_ms; also period_ms=, max_queue_delay_us=, and for the instances max_cpus=, min_instances=, dwell_periods=): docs/autopilot.md."},
		{Name: "model-namespacing", Group: "Model Repository", Kind: Bool, Default: "false",
			Usage: "Serve same-named models of different repositories under their repository's namespace."},
		{Name: "enable-peer-access", Group: "Model Repository", Kind: Bool, Default: "true", Status: NoOp, Feature: noPeerAccess, Usage: "Enable CUDA peer access between GPUs."},
		{Name: "allow-model-file-override", Group: "Model Repository", Kind: Bool, Default: "true", Inferd: true,
			Usage: "Accept model files in load requests (the repository API's file: parameters, pb_utils.load_model's files); false refuses them, so model control can be exposed without code upload."},
		{Name: "repository-cache-dir", Group: "Model Repository", Kind: String, Inferd: true,
			Usage: "Where models of s3://, gs:// and as:// repositories are copied (default: $TRITON_AWS_MOUNT_DIRECTORY, $TRITON_GCS_MOUNT_DIRECTORY or $TRITON_AZURE_MOUNT_DIRECTORY, else a folder under the process's own temporary folder, <temp dir>/inferd-<pid>-<start>/cache-*, removed at exit)."},

		{Name: "allow-http", Group: "HTTP", Kind: Bool, Default: "true", Usage: "Serve the KServe v2 HTTP API (default false when AIP_MODE=PREDICTION)."},
		{Name: "http-address", Group: "HTTP", Kind: String, Default: "0.0.0.0", Usage: "Address the HTTP API binds to."},
		{Name: "http-port", Group: "HTTP", Kind: Int, Default: "8000", Check: port, Usage: "Port of the KServe v2 HTTP API."},
		{Name: "reuse-http-port", Group: "HTTP", Kind: Bool, Default: "false", Usage: "Bind the HTTP port with SO_REUSEPORT, so several servers can share it."},
		{Name: "http-header-forward-pattern", Group: "HTTP", Kind: String, Check: forwardPattern,
			Usage: "Forward request headers whose (lower-cased) name matches this case-insensitive, unanchored RE2 expression to the model as string parameters (/infer)."},
		{Name: "http-thread-count", Group: "HTTP", Kind: Int, Default: "8", Check: atLeast(1),
			Usage: "Requests the HTTP API decodes and encodes at once (the work Triton's HTTP threads do; the inference itself is not bounded)."},
		{Name: "http-max-input-size", Group: "HTTP", Kind: Int64, Default: strconv.Itoa(httpapi.DefaultMaxInputSize), Check: positive64,
			Usage: "Largest JSON text, JSON tensor, raw body or decompressed body accepted, in bytes; a request body is read no further (binary tensors after the JSON header excepted)."},
		{Name: "http-restricted-api", Group: "HTTP", Kind: String, Repeat: true, Label: "<string>:<string>=<string>", Check: restricted,
			Usage: "Restrict API categories to requests carrying a header: <category>[,<category>...]:<key>=<value> (repeatable)."},
		{Name: "http-read-header-timeout", Group: "HTTP", Kind: Duration, Default: httpapi.DefaultReadHeaderTimeout.String(), Inferd: true, Check: nonNegative,
			Usage: "Longest time a client may take to send a request's headers, on every listener (0: no limit)."},
		{Name: "http-idle-timeout", Group: "HTTP", Kind: Duration, Default: httpapi.DefaultIdleTimeout.String(), Inferd: true, Check: nonNegative,
			Usage: "How long a kept-alive connection may wait for its next request, on every listener (0: no limit)."},
		{Name: "http-body-read-timeout", Group: "HTTP", Kind: Duration, Default: httpapi.DefaultBodyReadTimeout.String(), Inferd: true, Check: nonNegative,
			Usage: "Longest wait for more bytes of a request body; every read that brings data restarts it, so steady uploads of any size are never cut (0: no limit)."},
		{Name: "http-body-min-rate", Group: "HTTP", Kind: Int64, Default: strconv.Itoa(httpapi.DefaultBodyMinRate), Inferd: true, Check: atLeast64(0),
			Usage: "Bytes per second a request body must average once --http-body-read-timeout has passed (0: no minimum)."},

		{Name: "openai-api-key", Group: "HTTP", Kind: String, Repeat: true, Inferd: true, Check: nonEmpty,
			Usage: "API key the OpenAI (/v1/...) and TEI (/embed, /rerank, /tokenize) routes of the HTTP port require as \"Authorization: Bearer <key>\" (repeatable); the v2 routes keep their own rules."},
		{Name: "openai-api-key-file", Group: "HTTP", Kind: String, Repeat: true, Inferd: true, Check: nonEmpty,
			Usage: "File of API keys for the same routes, one a line (# comments), re-read within a second of a change so keys rotate without a restart (repeatable)."},

		{Name: "allow-grpc", Group: "GRPC", Kind: Bool, Default: "true", Usage: "Serve the KServe v2 gRPC API (default false when AIP_MODE=PREDICTION)."},
		{Name: "grpc-address", Group: "GRPC", Kind: String, Default: "0.0.0.0", Usage: "Address the gRPC API binds to."},
		{Name: "grpc-port", Group: "GRPC", Kind: Int, Default: "8001", Check: port, Usage: "Port of the gRPC API."},
		{Name: "reuse-grpc-port", Group: "GRPC", Kind: Bool, Default: "false", Usage: "Bind the gRPC port with SO_REUSEPORT."},
		{Name: "grpc-header-forward-pattern", Group: "GRPC", Kind: String, Check: forwardPattern,
			Usage: "Forward gRPC metadata whose key matches this case-insensitive, unanchored RE2 expression to the model as string parameters."},
		{Name: "grpc-infer-thread-count", Group: "GRPC", Kind: Int, Default: "2", Status: NoOp, Feature: noThreads, Check: grpcInferThreads, Usage: "gRPC inference threads (2 to 128)."},
		{Name: "grpc-infer-allocation-pool-size", Group: "GRPC", Kind: Int, Default: "8", Status: NoOp, Feature: noPool, Usage: "Inference request/response objects kept for reuse."},
		{Name: "grpc-max-response-pool-size", Group: "GRPC", Kind: Int, Default: "2147483647", Status: Planned, Feature: featStream, Check: responsePool, Usage: "Most inference response objects in flight."},
		{Name: "grpc-use-ssl", Group: "GRPC", Kind: Bool, Default: "false", Usage: "Serve gRPC over TLS."},
		{Name: "grpc-use-ssl-mutual", Group: "GRPC", Kind: Bool, Default: "false", Usage: "Serve gRPC over mutual TLS."},
		{Name: "grpc-server-cert", Group: "GRPC", Kind: String, Usage: "PEM server certificate."},
		{Name: "grpc-server-key", Group: "GRPC", Kind: String, Usage: "PEM server key."},
		{Name: "grpc-root-cert", Group: "GRPC", Kind: String, Usage: "PEM root certificate for client authentication."},
		{Name: "grpc-infer-response-compression-level", Group: "GRPC", Kind: String, Default: "none",
			Check: oneOf(true, "none", "low", "medium", "high"), Usage: "Response compression: none, low, medium or high."},
		{Name: "grpc-keepalive-time", Group: "GRPC", Kind: Int, Default: "7200000", Check: atLeast(0), Usage: "Keepalive ping period, ms."},
		{Name: "grpc-keepalive-timeout", Group: "GRPC", Kind: Int, Default: "20000", Check: atLeast(0), Usage: "Keepalive ping timeout, ms."},
		{Name: "grpc-keepalive-permit-without-calls", Group: "GRPC", Kind: Bool, Default: "false", Usage: "Allow keepalive pings without calls."},
		{Name: "grpc-http2-max-pings-without-data", Group: "GRPC", Kind: Int, Default: "2", Status: NoOp, Feature: noGRPCKnob, Usage: "Pings allowed without data."},
		{Name: "grpc-http2-min-recv-ping-interval-without-data", Group: "GRPC", Kind: Int, Default: "300000", Check: atLeast(0), Usage: "Least interval between received pings without data, ms."},
		{Name: "grpc-http2-max-ping-strikes", Group: "GRPC", Kind: Int, Default: "2", Check: atLeast(0), Usage: "Bad pings tolerated before the connection closes."},
		{Name: "grpc-max-connection-age", Group: "GRPC", Kind: Int, Default: "0", Check: atLeast(0), Usage: "Longest connection age, ms (0: unlimited)."},
		{Name: "grpc-max-connection-age-grace", Group: "GRPC", Kind: Int, Default: "0", Check: atLeast(0), Usage: "Grace period after the maximum age, ms."},
		{Name: "grpc-restricted-protocol", Group: "GRPC", Kind: String, Repeat: true, Label: "<string>:<string>=<string>", Check: restricted,
			Usage: "Restrict gRPC protocol categories to requests carrying metadata: <category>[,...]:<key>=<value>."},
		{Name: "grpc-load-report-every-call", Group: "GRPC", Kind: Bool, Default: "true", Inferd: true,
			Usage: "Put an ORCA load report (endpoint-load-metrics-bin) in the trailer of every ModelInfer call; false: only calls whose metadata carries endpoint-load-metrics-format."},

		{Name: "allow-sagemaker", Group: "Sagemaker", Kind: Bool, Default: "false", Usage: "Serve the SageMaker routes (/ping, /invocations, /models) on --sagemaker-port."},
		{Name: "sagemaker-port", Group: "Sagemaker", Kind: Int, Default: "8080", Check: port, Usage: "Port of the SageMaker listener (address 0.0.0.0)."},
		{Name: "sagemaker-safe-port-range", Group: "Sagemaker", Kind: String, Label: "<integer>-<integer>", Check: pair("-", Int, Int),
			Usage: "<lo>-<hi>: every other listener must use a port in this range."},
		{Name: "sagemaker-thread-count", Group: "Sagemaker", Kind: Int, Default: "8", Status: NoOp, Feature: noThreads, Usage: "SageMaker request threads."},
		{Name: "sagemaker-unload-timeout", Group: "Sagemaker", Kind: Duration, Default: sagemaker.DefaultUnloadTimeout.String(), Inferd: true, Check: nonNegative,
			Usage: "Longest an MME unload (DELETE /models/{m}) waits for the model's requests to finish before answering; SageMaker allows 360 s."},

		{Name: "allow-vertex-ai", Group: "Vertex", Kind: Bool, Default: "false", Usage: "Serve the Vertex AI routes on --vertex-ai-port (default: true when AIP_MODE=PREDICTION)."},
		{Name: "vertex-ai-port", Group: "Vertex", Kind: Int, Default: "8080", Check: port, Usage: "Port of the Vertex AI listener (default: AIP_HTTP_PORT, else 8080)."},
		{Name: "vertex-ai-thread-count", Group: "Vertex", Kind: Int, Default: "8", Status: NoOp, Feature: noThreads, Usage: "Vertex AI request threads."},
		{Name: "vertex-ai-default-model", Group: "Vertex", Kind: String, Usage: "Model the Vertex AI predict route serves (default: the only model)."},
		{Name: "vertex-ai-invoke-routes", Group: "Vertex", Kind: Bool, Default: "false", Inferd: true,
			Usage: "Serve the v2 API's own read-only and inference routes on the Vertex AI port, for a Model uploaded with invokeRoutePrefix \"/*\" (dedicated endpoints); AIP_PREDICT_ROUTE may then be unset."},

		{Name: "allow-metrics", Group: "Metrics", Kind: Bool, Default: "true", Usage: "Serve Prometheus metrics."},
		{Name: "allow-gpu-metrics", Group: "Metrics", Kind: Bool, Default: "true", Usage: "Report GPU utilisation, memory, power and energy through NVML (nv_gpu_*)."},
		{Name: "allow-cpu-metrics", Group: "Metrics", Kind: Bool, Default: "true", Usage: "Report CPU utilisation and memory (nv_cpu_*)."},
		{Name: "metrics-address", Group: "Metrics", Kind: String, Usage: "Address the metrics endpoint binds to (default: --http-address)."},
		{Name: "metrics-port", Group: "Metrics", Kind: Int, Default: "8002", Check: port, Usage: "Port of the Prometheus metrics endpoint (GET /metrics)."},
		{Name: "metrics-interval-ms", Group: "Metrics", Kind: Int, Default: "2000", Check: atLeast(1), Label: "float", Usage: "How often polled metrics (CPU, GPU, pinned memory) refresh, in ms."},
		{Name: "metrics-config", Group: "Metrics", Kind: String, Repeat: true, Label: "<string>=<string>", Check: metricsConfig,
			Usage: "Metrics setting <setting>=<value> (repeatable), e.g. counter_latencies=false."},

		{Name: "trace-config", Group: "Tracing", Kind: String, Repeat: true, Label: "<string>,<string>=<string>", Check: traceConfig,
			Usage: "Trace setting [<mode>,]<setting>=<value> (repeatable): level=OFF|TIMESTAMPS|TENSORS, rate=N, count=N, mode=triton|opentelemetry; " +
				"triton,file=<path>, triton,log-frequency=N; opentelemetry,url=<OTLP/HTTP endpoint>, opentelemetry,resource=<key>=<value>, opentelemetry,bsp_max_queue_size|bsp_schedule_delay|bsp_max_export_batch_size=N."},

		{Name: "backend-directory", Group: "Backend", Kind: String, Default: "/opt/tritonserver/backends", Status: NoOp, Feature: noBackendDir, Usage: "Where backends are found."},
		{Name: "backend-config", Group: "Backend", Kind: String, Repeat: true, Label: "<string>,<string>=<string>", Check: backendConfig,
			Usage: "Backend setting [<backend>,]<setting>=<value> (repeatable; without a backend it applies to every backend): " +
				"onnxruntime,library-path=...; default-max-batch-size=4; onnxruntime,enable-global-threadpool=true; onnxruntime,intra_op_thread_count=N; onnxruntime,inter_op_thread_count=N."},

		{Name: "repoagent-directory", Group: "Repository Agent", Kind: String, Default: "/opt/tritonserver/repoagents", Status: NoOp, Feature: noRepoAgent, Usage: "Where repository agent libraries are found (none are loaded: see docs/repositories.md)."},

		{Name: "cache-config", Group: "Response Cache", Kind: String, Repeat: true, Label: "<string>,<string>=<string>", Check: cacheConfig,
			Usage: "Response cache setting <cache>,<setting>=<value> (repeatable): local,size=<bytes>, or redis,host=<host> with redis,port=<port> and redis's user, password, db, timeouts and TLS."},
		{Name: "cache-directory", Group: "Response Cache", Kind: String, Default: "/opt/tritonserver/caches", Usage: "Where cache implementations are found (inferd has local and redis built in; named in the error for another cache)."},

		{Name: "rate-limit", Group: "Rate Limiter", Kind: String, Default: "off", Check: rateLimit,
			Usage: "Rate limiting: execution_count runs an instance's execution once the resources of its instance group's rate_limiter are free, the instances waiting ordered by executions × priority across models; off ignores rate_limiter and runs as soon as an instance is ready."},
		{Name: "rate-limit-resource", Group: "Rate Limiter", Kind: String, Repeat: true, Label: "<string>:<integer>:<integer>", Check: rateLimitResource,
			Usage: "Resource count <name>:<count>[:<device>] (repeatable); without <device> it applies to every device, and the device is ignored for global resources. " +
				"By default a resource has the most any instance needs; once any count is given, resources not given have none."},

		{Name: "pinned-memory-pool-byte-size", Group: "Memory/Device Management", Kind: Int64, Default: "268435456", Status: NoOp, Feature: noPinned, Check: atLeast64(0),
			Usage: "Pinned host memory pool size, bytes."},
		{Name: "cuda-memory-pool-byte-size", Group: "Memory/Device Management", Kind: String, Repeat: true, Label: "<integer>:<integer>", Status: NoOp, Feature: noCUDAPool, Check: pair(":", Int, Int64),
			Usage: "CUDA memory pool size of a GPU, <device>:<bytes> (repeatable)."},
		{Name: "cuda-virtual-address-size", Group: "Memory/Device Management", Kind: String, Repeat: true, Label: "<integer>:<integer>", Status: NoOp, Feature: noCUDAPool, Check: pair(":", Int, Int64),
			Usage: "CUDA virtual address space of a GPU, <device>:<bytes> (repeatable)."},
		{Name: "min-supported-compute-capability", Group: "Memory/Device Management", Kind: Float, Status: NoOp, Feature: noComputeCap, Usage: "Least CUDA compute capability of a usable GPU."},
		{Name: "buffer-manager-thread-count", Group: "Memory/Device Management", Kind: Int, Default: "0", Status: NoOp, Feature: noBufferMgr, Usage: "Buffer-manager threads."},
		{Name: "host-policy", Group: "Memory/Device Management", Kind: String, Repeat: true, Label: "<string>,<string>=<string>", Status: NoOp, Feature: noHostPolicy, Check: hostPolicy,
			Usage: "Host policy setting <policy>,<setting>=<value> (repeatable): numa-node or cpu-cores."},
		{Name: "model-load-gpu-limit", Group: "Memory/Device Management", Kind: String, Repeat: true, Label: "<device_id>:<fraction>", Status: NoOp, Feature: noGPULimit, Check: gpuLimit,
			Usage: "Fraction of a GPU's memory model loads may use, <device>:<fraction> (repeatable)."},

		{Name: "allow-client-shm", Group: "Shared Memory", Kind: Bool, Default: "false",
			Usage: "Let clients register and use shared-memory regions (system; CUDA is refused without a GPU) for inference inputs and outputs; false, Triton's default since 2.69, answers register and unregister with 501."},

		{Name: "strict-model-config", Group: "DEPRECATED", Kind: Bool, Default: "false", Usage: "Deprecated: true turns config auto-complete off (use --disable-auto-complete-config)."},
		{Name: "response-cache-byte-size", Group: "DEPRECATED", Kind: Int64, Usage: "Deprecated: use --cache-config=local,size=<bytes>."},
		{Name: "trace-file", Group: "DEPRECATED", Kind: String, Usage: "Deprecated: use --trace-config=triton,file=<path>."},
		{Name: "trace-level", Group: "DEPRECATED", Kind: String, Repeat: true, Check: oneOf(true, "off", "false", "timestamps", "true", "on", "min", "max", "tensors"),
			Usage: "Deprecated: use --trace-config=level=<level>."},
		{Name: "trace-rate", Group: "DEPRECATED", Kind: Int, Usage: "Deprecated: use --trace-config=rate=<n>."},
		{Name: "trace-count", Group: "DEPRECATED", Kind: Int, Usage: "Deprecated: use --trace-config=count=<n>."},
		{Name: "trace-log-frequency", Group: "DEPRECATED", Kind: Int, Usage: "Deprecated: use --trace-config=triton,log-frequency=<n>."},
	}
}

func oneOf(fold bool, values ...string) func(string) error {
	return func(v string) error {
		for _, w := range values {
			if v == w || (fold && strings.EqualFold(v, w)) {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
	}
}

// forwardPattern is a header forward pattern, compiled as it will be
// used, so a bad expression stops the start (Triton's RE2 would only log
// it and forward nothing).
func forwardPattern(v string) error {
	_, err := protocol.NewHeaderForwarder(v)
	return err
}

func nonEmpty(v string) error {
	if v == "" {
		return fmt.Errorf("empty value")
	}
	return nil
}

func atLeast(lo int64) func(string) error {
	return func(v string) error {
		if n, _ := strconv.ParseInt(v, 10, 64); n < lo {
			if lo == 0 {
				return fmt.Errorf("%s must not be negative", v)
			}
			return fmt.Errorf("%s must be at least %d", v, lo)
		}
		return nil
	}
}

var atLeast64 = atLeast

func positive64(v string) error {
	if n, _ := strconv.ParseInt(v, 10, 64); n <= 0 {
		return fmt.Errorf("%s must be greater than 0", v)
	}
	return nil
}

func between(lo, hi int64) func(string) error {
	return func(v string) error {
		if n, _ := strconv.ParseInt(v, 10, 64); n < lo || n > hi {
			return fmt.Errorf("%s must be in the range %d to %d", v, lo, hi)
		}
		return nil
	}
}

// tritonText is an error worded exactly as tritonserver words it,
// final period included.
type tritonText string

func (t tritonText) Error() string { return string(t) }

// grpcInferThreads answers Triton's text for --grpc-infer-thread-count.
func grpcInferThreads(v string) error {
	if between(2, 128)(v) != nil {
		return tritonText("invalid argument for --grpc_infer_thread_count. Must be in the range 2 to 128.")
	}
	return nil
}

// responsePool answers Triton's text for --grpc-max-response-pool-size.
func responsePool(v string) error {
	if atLeast(1)(v) != nil {
		return tritonText("--grpc-max-response-pool-size must be greater than 0.")
	}
	return nil
}

func port(v string) error { return between(0, 65535)(v) }

func nonNegative(v string) error {
	if s, _ := parseDuration(v); s < 0 {
		return fmt.Errorf("%s must not be negative", v)
	}
	return nil
}

// pair checks "<a><sep><b>" with each half of its kind.
func pair(sep string, a, b Kind) func(string) error {
	return func(v string) error {
		x, y, ok := strings.Cut(v, sep)
		if !ok {
			return fmt.Errorf("%q is not <first>%s<second>", v, sep)
		}
		if err := parseValue(a, x); err != nil {
			return err
		}
		return parseValue(b, y)
	}
}

func gpuLimit(v string) error {
	if err := pair(":", Int, Float)(v); err != nil {
		return err
	}
	dev, frac, _ := strings.Cut(v, ":")
	if d, _ := strconv.Atoi(dev); d < 0 {
		return fmt.Errorf("expects device ID >= 0, got %s", dev)
	}
	if f, _ := strconv.ParseFloat(frac, 64); f < 0 || f > 1 {
		return fmt.Errorf("expects limit fraction to be in range [0.0, 1.0], got %s", frac)
	}
	return nil
}

// Setting splits "[<group>,]<setting>=<value>" (--backend-config and its
// kin): the group is what comes before the first comma, the setting what
// comes before the next "=", the value the rest.
func Setting(v string) (group, setting, value string, err error) {
	rest := v
	eq := strings.IndexByte(v, '=')
	if i := strings.IndexByte(v, ','); i >= 0 && (eq < 0 || i < eq) {
		group, rest = v[:i], v[i+1:]
		if group == "" {
			return "", "", "", fmt.Errorf("%q: the name before ',' is empty", v)
		}
	}
	setting, value, ok := strings.Cut(rest, "=")
	if !ok || setting == "" || value == "" {
		return "", "", "", fmt.Errorf("%q is not [<name>,]<setting>=<value>", v)
	}
	return group, setting, value, nil
}

func backendConfig(v string) error {
	_, _, _, err := Setting(v)
	return err
}

func modelSLO(v string) error {
	_, _, err := autopilot.ParseFlag(v)
	return err
}

func cacheConfig(v string) error {
	group, _, _, err := Setting(v)
	if err == nil && group == "" {
		err = fmt.Errorf("%q names no cache: the format is <cache>,<setting>=<value>", v)
	}
	return err
}

func hostPolicy(v string) error {
	group, setting, _, err := Setting(v)
	switch {
	case err != nil:
		return err
	case group == "":
		return fmt.Errorf("%q names no policy: the format is <policy>,<setting>=<value>", v)
	case setting != "numa-node" && setting != "cpu-cores":
		return fmt.Errorf("unsupported host policy setting '%s', supported settings are 'numa-node', 'cpu-cores'", setting)
	}
	return nil
}

func traceConfig(v string) error {
	mode, _, _, err := Setting(v)
	if err == nil && mode != "" && !strings.EqualFold(mode, "triton") && !strings.EqualFold(mode, "opentelemetry") {
		err = fmt.Errorf("invalid trace mode %q: the modes are triton and opentelemetry", mode)
	}
	return err
}

func metricsConfig(v string) error {
	group, _, _, err := Setting(v)
	if err == nil && group != "" {
		err = fmt.Errorf("%q is not <setting>=<value>", v)
	}
	return err
}

func restricted(v string) error {
	cats, kv, ok := strings.Cut(v, ":")
	key, _, ok2 := strings.Cut(kv, "=")
	if !ok || !ok2 || cats == "" || key == "" {
		return fmt.Errorf("%q is not <category>[,<category>...]:<key>=<value>", v)
	}
	// The categories are checked with Triton's texts, which name the
	// flag's noun, when the groups are read (protocol.ParseRestriction).
	return nil
}

// rateLimit checks --rate-limit (case-insensitive) in Triton's words
// (triton-inference-server/server src/command_line_parser.cc).
func rateLimit(v string) error {
	if !strings.EqualFold(v, "execution_count") && !strings.EqualFold(v, "off") {
		return fmt.Errorf("invalid argument for --rate-limit: %q is not one of execution_count, off", v)
	}
	return nil
}

func rateLimitResource(v string) error {
	_, _, _, err := RateLimitResource(v)
	return err
}

// RateLimitResource reads a --rate-limit-resource value,
// <name>:<count>[:<device>], as Triton does
// (triton-inference-server/server src/command_line_parser.cc); device is
// -1 when not given. The name is kept as typed. Triton would take a
// negative count as a huge one; it is refused here.
func RateLimitResource(v string) (name string, count uint64, device int, err error) {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return "", 0, 0, tritonText("--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got " + v)
	}
	device = -1
	bad := parts[1] // Triton names the number it could not read
	n, err := strconv.Atoi(bad)
	if err == nil && len(parts) == 3 {
		bad = parts[2]
		device, err = strconv.Atoi(bad)
	}
	switch {
	case errors.Is(err, strconv.ErrRange):
		return "", 0, 0, tritonText("Provided option value is out of bound. Got " + bad)
	case err != nil:
		return "", 0, 0, tritonText("Invalid option value. Got " + bad)
	case n < 0:
		return "", 0, 0, fmt.Errorf("the count of --rate-limit-resource must not be negative. Got %s", v)
	}
	return parts[0], uint64(n), device, nil
}
