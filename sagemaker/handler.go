// Package sagemaker is the Amazon SageMaker container frontend: /ping,
// /invocations and the multi-model endpoint routes. Triton's is
// triton-inference-server/server src/sagemaker_server.cc; AWS's contract is
// https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html
// and, for multi-model endpoints,
// https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html.
// It is a thin translation layer: health and v2 inference requests are
// rewritten onto the base KServe v2 server (httpapi) and its replies
// adjusted where SageMaker differs (baseReply, reply.go); JSON Lines
// {"instances"} records and CSV rows are translated by the instances
// translator shared with Vertex AI (platforms/instances) and run through
// the inference pipeline (platforms/infer), with SageMaker's envelopes,
// content types and error wording kept here; model management goes to the
// core. Handlers return their errors to the base server's one renderer,
// httpapi.RenderError: SageMaker's own refusals are httpapi.StatusErrors
// (400 for a bad record, 409 for a second load), the routes Triton answers
// with a bare status (src/sagemaker_server.cc) httpapi.Empty, and
// recordError (errors.go) words instances mapping failures as SageMaker's.
// ServeArgs is the container's `serve` entrypoint, which turns the
// SageMaker environment into inferd's flags.
package sagemaker

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
)

// Options configure the frontend.
type Options struct {
	// DefaultModel serves /invocations (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME).
	DefaultModel string
	// PingMode "live" answers /ping with liveness; anything else readiness.
	PingMode string
	// InferenceType is infer, generate or generate_stream.
	InferenceType string
	// ModelsRoot is where SageMaker extracts MME artifacts; load urls must
	// lie under it. Default /opt/ml/models (tests point it elsewhere).
	ModelsRoot string
	// UnloadTimeout bounds an MME unload: the wait for the model's
	// in-flight requests and for the index to report it unloaded
	// (as SageMakerMMEUnloadModel in src/sagemaker_server.cc). Default
	// DefaultUnloadTimeout.
	UnloadTimeout time.Duration
	// Batch holds the batch transform settings (SAGEMAKER_BATCH and
	// friends), which /execution-parameters reports.
	Batch BatchOptions
	// InvocationTimeout bounds one /invocations request, inference
	// included (SAGEMAKER_MODEL_SERVER_TIMEOUT, in seconds); 0: no bound,
	// so batch transform's and asynchronous inference's hour-long
	// requests run to the end.
	InvocationTimeout time.Duration
	// MetricsPath serves Metrics on the SageMaker port
	// (SAGEMAKER_TRITON_METRICS_PATH, e.g. /metrics, where an inference
	// component's ContainerMetricsConfig scrapes by default); "": not
	// served. A nil Metrics with a path gets a handler of
	// the default metrics configuration.
	MetricsPath string
	Metrics     http.Handler
	Logger      *slog.Logger
}

// DefaultUnloadTimeout is 350 s: SageMaker gives an unload 360 s, so the
// reply must come before that.
const DefaultUnloadTimeout = 350 * time.Second

// OptionsFromEnv reads the env the server process sees (the SAGEMAKER_TRITON_*
// variables Triton's server reads, src/sagemaker_server.h).
func OptionsFromEnv(getenv func(string) string) Options {
	o := Options{
		DefaultModel:  getenv(envDefaultModel),
		PingMode:      getenv(envPingMode),
		InferenceType: getenv(envInferenceType),
		Batch:         batchFromEnv(getenv),
		MetricsPath:   getenv(envMetricsPath),
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(getenv(envModelServerTimeout))); err == nil && secs > 0 {
		o.InvocationTimeout = time.Duration(secs) * time.Second
	}
	return o.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.DefaultModel == "" {
		o.DefaultModel = unspecifiedModel
	}
	if o.PingMode == "" {
		o.PingMode = "ready"
	}
	if o.InferenceType == "" {
		o.InferenceType = "infer"
	}
	if o.ModelsRoot == "" {
		o.ModelsRoot = "/opt/ml/models"
	}
	if o.UnloadTimeout <= 0 {
		o.UnloadTimeout = DefaultUnloadTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

type handler struct {
	core *core.Server
	api  *httpapi.Server
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	loaded  map[string]*mmeModel // SageMaker model id -> record
	pending map[string]bool      // ids being loaded (a second load is 409)

	// Unload waits for the index to report the model unloaded, as Triton's
	// SageMakerMMECheckUnloadedModelIsUnavailable does.
	pollEvery, unloadTimeout time.Duration

	// recovered is serve behind httpapi.Recover.
	recovered http.Handler
}

// New builds the SageMaker handler over the core and its base API server.
// The listener (body size cap, chunk counting) is the caller's.
func New(c *core.Server, api *httpapi.Server, opts Options) http.Handler {
	opts = opts.withDefaults()
	if opts.MetricsPath != "" && opts.Metrics == nil {
		opts.Metrics = metrics.NewHandler(c, metrics.DefaultConfig())
	}
	h := &handler{
		core: c, api: api, opts: opts, log: opts.Logger,
		loaded: map[string]*mmeModel{}, pending: map[string]bool{},
		pollEvery: 500 * time.Millisecond, unloadTimeout: opts.UnloadTimeout,
	}
	h.recovered = httpapi.Recover(http.HandlerFunc(h.serve), h.log, h.modelOf)
	return h
}

// ServeHTTP serves the SageMaker routes; a panic answers its request 500
// (httpapi.Recover) and the listener goes on serving.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.recovered.ServeHTTP(w, r) }

// modelOf names a request's model for httpapi.Recover: the default model
// of /invocations, the served name (or id) of an MME route. It takes no
// lock: the panic may have happened holding one.
func (h *handler) modelOf(r *http.Request) string {
	if r.URL.Path == "/invocations" {
		return h.opts.DefaultModel
	}
	if !strings.HasPrefix(r.URL.Path, "/models/") {
		return ""
	}
	if id, _, ok := parseModelsPath(r.URL.Path); ok && id != "" {
		if n := servedFromHeader(r.Header.Get(targetModelHeader)); n != "" {
			return n
		}
		return id
	}
	return ""
}

// serve dispatches on the exact path, in Triton's order (Handle in
// src/sagemaker_server.cc). Paths are
// compared as strings: http.ServeMux would redirect /models and cleaned
// paths where SageMaker expects 400.
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	if err := h.route(w, r); err != nil {
		httpapi.RenderError(w, err)
	}
}

// route serves r; its error is the reply's, which serve renders.
func (h *handler) route(w http.ResponseWriter, r *http.Request) error {
	switch p := r.URL.Path; {
	case p == "/ping":
		h.ping(w, r)
	case p == "/invocations":
		return h.invocations(w, r)
	case p == "/execution-parameters":
		return h.executionParameters(w, r)
	case p == h.opts.MetricsPath:
		h.opts.Metrics.ServeHTTP(w, r)
	case p == "/models" || strings.HasPrefix(p, "/models/"):
		id, invoke, ok := parseModelsPath(p)
		if !ok {
			return httpapi.Empty(http.StatusBadRequest)
		}
		switch {
		case r.Method == http.MethodGet && id == "" && !invoke:
			h.list(w, r)
		case r.Method == http.MethodGet:
			return h.get(w, r, id)
		case r.Method == http.MethodPost && invoke:
			return h.invoke(w, r, id)
		case r.Method == http.MethodPost:
			return h.load(w, r) // POST /models/{m} loads too (Triton quirk, mirrored)
		case r.Method == http.MethodDelete:
			return h.unload(w, r, id)
		default:
			return httpapi.Empty(http.StatusBadRequest)
		}
	default:
		return httpapi.Empty(http.StatusBadRequest)
	}
	return nil
}

// parseModelsPath splits /models[/[{m}[/invoke]]]. Unlike Triton's regex
// the slash after /models is required (/modelsfoo is 400).
func parseModelsPath(p string) (id string, invoke, ok bool) {
	rest := strings.TrimPrefix(p, "/models")
	if rest == "" || rest == "/" {
		return "", false, true
	}
	if rest[0] != '/' {
		return "", false, false
	}
	rest = rest[1:]
	id, tail, _ := strings.Cut(rest, "/")
	switch tail {
	case "":
		return id, false, !strings.HasSuffix(rest, "/")
	case "invoke":
		return id, true, true
	}
	return "", false, false
}

// ping is GET /v2/health/{ready,live} on the base server, which owns the
// health restriction, 405 and the 503 while exiting.
func (h *handler) ping(w http.ResponseWriter, r *http.Request) {
	target := "/v2/health/ready"
	if h.opts.PingMode == "live" {
		target = "/v2/health/live"
	}
	h.api.ServeHTTP(w, h.rewrite(r, target))
}

// invocations runs the default model, by SAGEMAKER_TRITON_INFERENCE_TYPE.
func (h *handler) invocations(w http.ResponseWriter, r *http.Request) error {
	if t := h.opts.InvocationTimeout; t > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), t)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if route := customRoute(r.Header.Get(customAttributes)); route != "" {
		// A route of the base server's text APIs (platforms/openai),
		// asked for by the caller: served there as it is, with its own
		// body, errors and streaming.
		h.api.ServeHTTP(w, h.rewrite(r, route))
		return nil
	}
	if h.opts.InferenceType != "infer" {
		return h.generate(w, r)
	}
	if format := recordFormat(r.Header.Get("Content-Type")); format != "" && r.Method == http.MethodPost {
		return h.records(w, r, h.opts.DefaultModel, format)
	}
	return h.infer(w, r, h.opts.DefaultModel, false)
}

// customAttributes is the header SageMaker passes InvokeEndpoint's
// CustomAttributes in, verbatim (docs.aws.amazon.com/sagemaker/latest/
// APIReference/API_runtime_InvokeEndpoint.html).
const customAttributes = "X-Amzn-SageMaker-Custom-Attributes"

// textRoutes are the routes a caller may ask /invocations for with
// CustomAttributes "route=<path>": the OpenAI and TEI routes
// (docs/openai.md), which SageMaker cannot reach by their own paths.
var textRoutes = map[string]bool{
	"/v1/embeddings": true, "/v1/rerank": true, "/v1/chat/completions": true, "/v1/completions": true,
	"/v1/models": true, "/embed": true, "/rerank": true, "/tokenize": true,
}

// customRoute is the text route CustomAttributes attrs ask for
// ("route=/v1/embeddings", among other ';' or ',' separated attributes),
// or "" when they ask for none of textRoutes.
func customRoute(attrs string) string {
	for attr := range strings.FieldsFuncSeq(attrs, func(c rune) bool { return c == ';' || c == ',' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(attr), "=")
		if ok && strings.TrimSpace(k) == "route" && textRoutes[strings.TrimSpace(v)] {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// generate is POST /v2/models/<default>/generate or /generate_stream on the
// base server, which answers the restriction 403, the 405
// and every reply, SSE included. Unlike infer, Content-Encoding is kept:
// the generate routes reject a non-identity one.
func (h *handler) generate(w http.ResponseWriter, r *http.Request) error {
	name := h.opts.DefaultModel
	if strings.Contains(name, "/") {
		// Not routable on the base server; core never serves such names.
		if h.restricted(w, r, "inference") {
			return nil
		}
		if r.Method != http.MethodPost {
			return httpapi.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
		}
		return h.unknownModel(name, false)
	}
	fwd := h.rewrite(r, "/v2/models/"+name+"/"+h.opts.InferenceType)
	if ce, ok := r.Header["Content-Encoding"]; ok {
		fwd.Header["Content-Encoding"] = ce
	}
	h.api.ServeHTTP(w, fwd)
	return nil
}

// infer is POST /v2/models/<name>/infer on the base server with the
// SageMaker body and reply rules. mme folds every error but a restriction
// 403 into 400, or 507 on an out-of-memory message (as Triton's
// SageMakerMMECheckOOMError).
func (h *handler) infer(w http.ResponseWriter, r *http.Request, name string, mme bool) error {
	if r.Method != http.MethodPost {
		// The base server answers the restriction 403 or the 405.
		h.api.ServeHTTP(w, h.rewrite(r, "/v2/models/_/infer"))
		return nil
	}
	size, present, err := headerSize(r.Header.Get("Content-Type"), r.ContentLength)
	if err != nil {
		if h.restricted(w, r, "inference") {
			return nil
		}
		return httpapi.Errorf(http.StatusBadRequest, "%s", err)
	}
	if strings.Contains(name, "/") {
		// Not routable on the base server; core never serves such names.
		if h.restricted(w, r, "inference") {
			return nil
		}
		return h.unknownModel(name, mme)
	}
	fwd := h.rewrite(r, "/v2/models/"+name+"/infer")
	// The vendor content type replaces the base server's header, which
	// SageMaker requests must not set themselves (src/sagemaker_server.cc).
	if present {
		fwd.Header.Set(codec.HeaderLengthName, strconv.Itoa(size))
	}
	reply := &baseReply{w: w, hold: mme}
	h.api.ServeHTTP(reply, fwd)
	if reply.held {
		status := http.StatusBadRequest
		switch {
		case reply.status == http.StatusForbidden:
			status = reply.status
		case hasOOMMarker(reply.body.String()):
			status = http.StatusInsufficientStorage
		}
		reply.flush(status)
	}
	return nil
}

// unknownModel is the error of a model name the base server cannot route
// (it holds a "/"; core never serves such names), with unknownStatus.
func (h *handler) unknownModel(name string, mme bool) error {
	return httpapi.Errorf(h.unknownStatus(mme), "Request for unknown model: '%s' is not found", name)
}

// unknownStatus is the status of an unknown model's error: INVALID_ARG's
// 400 with model namespacing (Triton's ModelRepositoryManager::
// FindModelIdentifier, triton-inference-server/core
// src/model_repository_manager/model_repository_manager.cc) and on the
// multi-model routes, which fold every error into 400; NOT_FOUND's 404
// otherwise.
func (h *handler) unknownStatus(mme bool) int {
	if mme || h.core.Namespacing() {
		return http.StatusBadRequest
	}
	return http.StatusNotFound
}

// rewrite clones r onto a base-server path. Headers SageMaker's listener
// ignores (compression, the base binary header) are dropped.
func (h *handler) rewrite(r *http.Request, path string) *http.Request {
	fwd := httpapi.Reroute(r, r.Method, path)
	fwd.Header.Del(codec.HeaderLengthName)
	fwd.Header.Del("Content-Encoding")
	fwd.Header.Del("Accept-Encoding")
	return fwd
}

// restricted writes the base server's 403 when r lacks the header that
// --http-restricted-api requires for category.
func (h *handler) restricted(w http.ResponseWriter, r *http.Request, category string) bool {
	return h.api.Restricted(w, r, category)
}

// oomMarkers are the substrings that make an MME load or invoke failure a
// 507, so SageMaker evicts models and retries (the list of Triton's
// SageMakerMMECheckOOMError; the 507 rule is in
// https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
var oomMarkers = []string{
	"CUDA out of memory", "CUDA_OUT_OF_MEMORY", "Out of memory", "Out Of Memory", "out of memory",
	"MemoryError", "OutOfMemory", "OOM", "Dst tensor is not initialized", "Src tensor is not initialized",
	"CNMEM_STATUS_OUT_OF_MEMORY", "CUDNN_STATUS_NOT_INITIALIZED", "CUBLAS_STATUS_ALLOC_FAILED",
	"CUBLAS_STATUS_NOT_INITIALIZED", "Failed to allocate memory", "failed to allocate memory", "No space left on device",
}

func hasOOMMarker(msg string) bool {
	for _, m := range oomMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	writeBody(w, status, "application/json", body)
}

// writeBody writes a whole reply of contentType.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
