package vertex

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/protocol"
)

// Start-up error texts, Triton's own (tests and users grep for them; the
// "API_" typo is Triton's).
const (
	MsgNoPredictRoute = "API_PREDICT_ROUTE is not defined for Vertex AI endpoint"
	MsgNoHealthRoute  = "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint"
	MsgSingleModel    = "Expect the model repository contains only a single model if default model is not specified"
)

// RedirectHeader names the target of a redirected predict request.
const RedirectHeader = "X-Vertex-Ai-Triton-Redirect"

// Options configure the Vertex frontend.
type Options struct {
	// HealthRoute and PredictRoute are AIP_HEALTH_ROUTE and AIP_PREDICT_ROUTE.
	HealthRoute, PredictRoute string
	// DefaultModel is --vertex-ai-default-model; empty means "the only
	// model in the repository".
	DefaultModel string
	Logger       *slog.Logger
	// Metrics serves the "metrics" redirect target; nil builds one over the
	// core with metrics.DefaultConfig().
	Metrics http.Handler
	// InvokeRoutes serves the v2 API's own routes at every path other than
	// the health and predict routes (--vertex-ai-invoke-routes): a Model
	// uploaded with containerSpec.invokeRoutePrefix "/*" on a dedicated
	// endpoint receives ".../invoke/<path>" as "/<path>". Routes that
	// change the server are refused (403), as through the redirect header.
	InvokeRoutes bool
}

// startupError is a start-up check failure. Its own type keeps Triton's
// capitalised texts intact.
type startupError string

func (e startupError) Error() string { return string(e) }

// OptionsFromEnv reads the routes Vertex sets (AIP_PREDICT_ROUTE,
// AIP_HEALTH_ROUTE) and fails as Triton does when either is missing. With
// invoke routes AIP_PREDICT_ROUTE may be missing: a Model has either a
// predict route or an invoke route prefix.
func OptionsFromEnv(getenv func(string) string, defaultModel string, invoke bool) (Options, error) {
	o := Options{PredictRoute: getenv("AIP_PREDICT_ROUTE"), HealthRoute: getenv("AIP_HEALTH_ROUTE"), DefaultModel: defaultModel, InvokeRoutes: invoke}
	if o.PredictRoute == "" && !invoke {
		return Options{}, startupError(MsgNoPredictRoute)
	}
	if o.HealthRoute == "" {
		return Options{}, startupError(MsgNoHealthRoute)
	}
	return o, nil
}

// Handler is the Vertex listener's http.Handler.
type Handler struct {
	core    *core.Server
	api     *httpapi.Server
	opts    Options
	log     *slog.Logger
	metrics http.Handler
	// model is the resolved default model; nil until Resolve succeeds.
	model atomic.Pointer[string]
	// recovered is serve behind httpapi.Recover.
	recovered http.Handler
}

// New builds the handler. It serves at once (health answers 400 and
// predict 503 until Resolve), so the listener can bind before loading.
func New(c *core.Server, api *httpapi.Server, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewHandler(c, metrics.DefaultConfig())
	}
	h := &Handler{core: c, api: api, opts: opts, log: opts.Logger, metrics: opts.Metrics}
	h.recovered = httpapi.Recover(http.HandlerFunc(h.serve), h.log, h.modelOf)
	return h
}

// modelOf names the model of a request for httpapi.Recover: the redirect
// target's, else the predict route's default model, else an invoke
// route's.
func (h *Handler) modelOf(r *http.Request) string {
	if h.opts.PredictRoute == "" || r.URL.Path != h.opts.PredictRoute {
		if h.opts.InvokeRoutes && r.URL.Path != h.opts.HealthRoute {
			return httpapi.ModelOfPath(r.URL.Path)
		}
		return ""
	}
	if target, ok := r.Header[RedirectHeader]; ok {
		if len(target) == 0 {
			return ""
		}
		return httpapi.ModelOfPath("/" + target[0])
	}
	return h.DefaultModel()
}

// Resolve picks the default model over the READY models (call it after the
// start-up loads) and marks the handler ready. Unlike Triton it counts
// model names, not versions, so one model with several READY versions
// starts (a quirk of triton-inference-server/server src/vertex_ai_server.cc,
// fixed).
func (h *Handler) Resolve() error {
	entries, err := h.core.Index(context.Background(), true)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.State == core.StateReady && (len(names) == 0 || names[len(names)-1] != e.Name) {
			names = append(names, e.Name) // Index is sorted by name
		}
	}
	model := h.opts.DefaultModel
	switch {
	case model == "" && h.opts.PredictRoute == "":
		// Invoke routes only: requests name their models.
	case model == "":
		if len(names) != 1 {
			return startupError(MsgSingleModel)
		}
		model = names[0]
	default:
		found := false
		for _, n := range names {
			found = found || n == model
		}
		if !found {
			return startupError("Expect the default model '" + model + "' is loaded")
		}
	}
	h.model.Store(&model)
	h.log.Info("vertex: serving", "default_model", model, "predict_route", h.opts.PredictRoute, "health_route", h.opts.HealthRoute)
	return nil
}

// DefaultModel returns the resolved default model ("" before Resolve).
func (h *Handler) DefaultModel() string {
	if m := h.model.Load(); m != nil {
		return *m
	}
	return ""
}

// ServeHTTP serves the Vertex routes; a panic answers its request 500
// (httpapi.Recover) and the listener goes on serving.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.recovered.ServeHTTP(w, r) }

// serve dispatches in Triton's order: health route first (so it wins when
// both routes are equal), then predict, then the invoke routes when on,
// else 400.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if err := h.route(w, r); err != nil {
		writeError(w, err)
	}
}

// route serves r; its error is the reply's, which serve renders.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) error {
	switch {
	case r.URL.Path == h.opts.HealthRoute:
		h.health(w, r)
	case h.opts.PredictRoute != "" && r.URL.Path == h.opts.PredictRoute:
		model := h.model.Load()
		if model == nil {
			return protocol.ErrServerNotReady
		}
		// Header keys arrive canonicalised, so any spelling matches.
		if target, ok := r.Header[RedirectHeader]; ok {
			value := ""
			if len(target) > 0 {
				value = target[0]
			}
			return h.redirect(w, r, "/"+value)
		}
		if wantsEvents(r.Header) {
			// streamRawPredict: the default model's generate_stream.
			h.api.ServeHTTP(w, rewrite(r, r.Method, "/v2/models/"+*model+"/generate_stream"))
			return nil
		}
		return h.infer(w, r, *model, "/v2/models/"+*model+"/infer", true)
	case h.opts.InvokeRoutes:
		return h.invoke(w, r)
	default:
		return httpapi.Empty(http.StatusBadRequest)
	}
	return nil
}

// wantsEvents reports whether the request accepts server-sent events
// (Accept: text/event-stream), as a streamRawPredict caller does.
func wantsEvents(header http.Header) bool {
	for _, v := range header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mediaType, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// invoke serves a path Vertex forwarded from a dedicated endpoint's invoke
// route: the v2 API's own route, with its own method, framing
// (Inference-Header-Content-Length, encodings) and errors, and /metrics;
// a route that changes the server answers 403 with no body.
//
// Vertex's invoke method is a POST, so a POST to a route that is GET-only
// and reads (health, metadata, config, ready, stats, shared-memory status,
// metrics) is served as its GET, as the redirect header does.
func (h *Handler) invoke(w http.ResponseWriter, r *http.Request) error {
	p, method := r.URL.Path, r.Method
	if method == http.MethodPost && readsWithGet(p) {
		method = http.MethodGet
	}
	switch {
	case p == "/metrics":
		h.metrics.ServeHTTP(w, httpapi.Reroute(r, method, p))
	case changesServer(method, p):
		return httpapi.Empty(http.StatusForbidden)
	default:
		h.api.ServeHTTP(w, httpapi.Reroute(r, method, p))
	}
	return nil
}

// readsWithGet reports whether path is a GET-only route that only reads:
// a v2 one, or OpenAI's model list (platforms/openai).
func readsWithGet(path string) bool {
	if path == "/v1/models" || strings.HasPrefix(path, "/v1/models/") {
		return true
	}
	if m := targets().model.FindStringSubmatch(path); m != nil {
		switch m[3] {
		case "", "ready", "config", "stats":
			return true
		}
		return false
	}
	if m := targets().shm.FindStringSubmatch(path); m != nil {
		return m[1] == "status"
	}
	return path == "/metrics" || path == "/v2/models/stats" || targets().server.MatchString(path)
}

// changesServer reports whether the v2 route at path, called with method,
// changes the server: model load/unload, shared-memory registration, and
// the log and trace settings on any method but GET.
func changesServer(method, path string) bool {
	if m := targets().shm.FindStringSubmatch(path); m != nil {
		return m[1] != "status"
	}
	if m := targets().repo.FindStringSubmatch(path); m != nil {
		return m[1] != "index"
	}
	if path == "/v2/logging" || targets().trace.MatchString(path) {
		return method != http.MethodGet
	}
	return false
}

// health is the base server's readiness check; before Resolve a ready
// answer is turned into 400 (unresolved), since the default model is not
// known yet.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	req := rewrite(r, r.Method, "/v2/health/ready")
	if h.model.Load() != nil {
		h.api.ServeHTTP(w, req)
		return
	}
	h.api.ServeHTTP(&unresolved{ResponseWriter: w}, req)
}

// Redirect targets, as Triton's regular expressions match them.
type redirectTargets struct {
	model, server, shm, repo, trace *regexp.Regexp
}

// targets compiles the redirect targets on first use: only a Vertex AI
// server redirects, and compiling them at every start took 0.13 ms and
// 84 KB (GODEBUG=inittrace=1).
var targets = sync.OnceValue(func() *redirectTargets {
	return &redirectTargets{
		model:  regexp.MustCompile(`^/v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(infer|generate|generate_stream|ready|config|stats|trace/setting))?$`),
		server: regexp.MustCompile(`^/v2(?:/health/(live|ready))?$`),
		shm:    regexp.MustCompile(`^/v2/(?:system|cuda)sharedmemory(?:/region/[^/]+)?/(status|register|unregister)$`),
		repo:   regexp.MustCompile(`^/v2/repository(?:/[^/]+)?/(index|models/[^/]+/(?:load|unload))$`),
		trace:  regexp.MustCompile(`^/v2(?:/models/[^/]+(?:/versions/[0-9]+)?)?/trace/setting$`),
	}
})

// redirect serves X-Vertex-Ai-Triton-Redirect (triton-inference-server/
// server src/vertex_ai_server.cc). The base
// handler of the target runs with the target's native method, so it also
// applies the target's restriction category.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, target string) error {
	if r.Method != http.MethodPost {
		return httpapi.Empty(http.StatusMethodNotAllowed)
	}
	if m := targets().model.FindStringSubmatch(target); m != nil && m[3] == "infer" {
		return h.infer(w, r, m[1], target, false)
	}
	// Of the other model routes, generate, generate_stream and
	// trace/setting are not offered on Vertex.
	switch {
	case target == "/metrics":
		h.metrics.ServeHTTP(w, rewrite(r, http.MethodGet, "/metrics"))
	case readsWithGet(target):
		h.api.ServeHTTP(w, rewrite(r, http.MethodGet, target))
	case targets().shm.MatchString(target):
		return httpapi.Empty(http.StatusForbidden) // mutating: refused whatever the headers
	case targets().repo.MatchString(target):
		if targets().repo.FindStringSubmatch(target)[1] != "index" {
			return httpapi.Empty(http.StatusForbidden) // load/unload: refused whatever the headers
		}
		h.api.ServeHTTP(w, rewrite(r, http.MethodPost, target))
	default:
		return httpapi.Empty(http.StatusBadRequest)
	}
	return nil
}

// infer serves an inference on model through the base route path, with
// Vertex's body framing. translate allows the "instances" translation
// (platforms/instances). Only a body that may be an "instances" request
// (JSON, on the predict route) is read here, and no further than
// --http-max-input-size; any other goes to the base server unread, which
// reads it within its limits.
func (h *Handler) infer(w http.ResponseWriter, r *http.Request, model, path string, translate bool) error {
	if r.Method != http.MethodPost {
		// The base route answers 403 (restricted) or 405 with JSON.
		h.api.ServeHTTP(w, rewrite(r, r.Method, path))
		return nil
	}
	jsonLen, err := headerSize(r.Header.Get("Content-Type"), r.ContentLength)
	if err != nil {
		return h.refuse(w, r, err)
	}
	if !translate || jsonLen >= 0 {
		req := rewriteStream(r, path)
		if jsonLen >= 0 {
			req.Header.Set(codec.HeaderLengthName, strconv.Itoa(jsonLen))
		}
		h.api.ServeHTTP(w, req)
		return nil
	}
	body, err := httpapi.ReadBody(r, h.api.MaxInputSize())
	var tooLarge *httpapi.BodyTooLarge
	switch {
	case errors.As(err, &tooLarge):
		return h.tooLarge(w, r, model, path, tooLarge.Size)
	case err != nil:
		return h.refuse(w, r, badRequest(err.Error()))
	}
	if q, ok := instances.Parse(body); ok {
		return h.predictInstances(w, r, model, path, q)
	}
	h.api.ServeHTTP(w, rewriteBody(r, path, body))
	return nil
}

// tooLarge answers a predict body over --http-max-input-size as the base
// infer route would: its lookup errors (and the decoupled refusal) first.
func (h *Handler) tooLarge(w http.ResponseWriter, r *http.Request, model, path string, size int64) error {
	mv, release, err := h.core.Acquire(model, core.LatestVersion)
	if err == nil {
		decoupled := mv.Config.GetModelTransactionPolicy().GetDecoupled()
		release()
		if !decoupled {
			return h.refuse(w, r, badRequest(codec.JSONTooLargeError(size, h.api.MaxInputSize()).Error()))
		}
	}
	// The base route reports the lookup failure with its own status.
	h.api.ServeHTTP(w, rewriteBody(r, path, nil))
	return nil
}

// refuse returns err, found before the base server saw the request, unless
// the route's restriction applies: Triton checks it (403) first.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error) error {
	if h.api.Restricted(w, r, "inference") {
		return nil
	}
	return err
}
