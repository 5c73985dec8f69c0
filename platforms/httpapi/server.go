// Package httpapi is the KServe v2 / Triton HTTP API over the inference
// core; its inferences run through the pipeline of platforms/infer.
// Platform frontends reuse it rather than copy it: SageMaker rewrites its
// requests onto these routes, Lambda turns events into requests for them,
// and Vertex AI does both, running its "instances" format through the same
// pipeline (Pipeline).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/trace"
)

// DefaultMaxInputSize is --http-max-input-size's default (64 MiB).
const DefaultMaxInputSize = 64 << 20

// Options configure the HTTP API.
type Options struct {
	// MaxInputSize bounds JSON text, JSON-decoded tensors, raw bodies and
	// decompressed bodies (--http-max-input-size).
	MaxInputSize int64
	// Restricted maps an API category to the header it requires
	// (--http-restricted-api).
	Restricted map[string]Restriction
	// ServerID is the server metadata's "name" (--id; Triton's default is
	// "triton").
	ServerID string
	// LoadReports answers endpoint-load-metrics-format with ORCA load
	// reports (triton-inference-server/server src/orca_http.cc); nil: never
	// (metrics off).
	LoadReports *orca.Reporter
	// Workers bounds the infer requests being decoded or encoded at once
	// (--http-thread-count: the work Triton's HTTP threads do, while the
	// inference itself and body reads are not bounded); 0: no bound.
	Workers int
	Logger  *slog.Logger
	// Logs are the run-time log settings /v2/logging reads and changes
	// (those of Logger's handler); fresh defaults when nil.
	Logs *logging.Settings
	// HeaderForward is --http-header-forward-pattern; nil forwards nothing.
	HeaderForward *protocol.HeaderForwarder
	// Trace holds the trace settings and samples inference requests
	// (triton-inference-server/server docs/protocol/extension_trace.md); a
	// manager with tracing OFF when nil.
	Trace *trace.Manager
	// SharedMemory holds the client shared-memory regions, one table for
	// both frontends (--allow-client-shm); nil: the extension is off and
	// its routes answer as a Triton started without the flag.
	SharedMemory *shm.Manager
}

// Restriction is one --http-restricted-api group's header.
type Restriction = protocol.Restriction

// Categories of --http-restricted-api.
var Categories = protocol.RestrictedCategories

// ParseRestriction reads one --http-restricted-api value,
// "<cat>[,<cat>...]:<key>=<value>", into dst (protocol.ParseRestriction, worded
// "restricted api" as Triton's option parser in triton-inference-server/server
// src/command_line_parser.cc).
func ParseRestriction(dst map[string]Restriction, arg string) error {
	return protocol.ParseRestriction(dst, arg, "api")
}

// Server serves the v2 API.
type Server struct {
	core    *core.Server
	opts    Options
	log     *slog.Logger
	logs    *logging.Settings
	router  chi.Router
	handler http.Handler // inferRouter and the router behind LogRequests and Recover
	exiting atomic.Bool
	meta    []byte        // server metadata, computed once
	workers chan struct{} // Options.Workers slots; nil: no bound
	pipe    infer.Pipeline
	// inflating counts the compressed bodies being inflated (in a worker
	// slot each, so never more than Options.Workers at once).
	inflating gauge
}

// New builds the API server over c.
func New(c *core.Server, opts Options) *Server {
	if opts.MaxInputSize <= 0 {
		opts.MaxInputSize = DefaultMaxInputSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ServerID == "" {
		opts.ServerID = "triton"
	}
	if opts.Logs == nil {
		opts.Logs = logging.New("", logging.Default())
	}
	s := &Server{core: c, opts: opts, log: opts.Logger, logs: opts.Logs}
	if opts.Workers > 0 {
		s.workers = make(chan struct{}, opts.Workers)
	}
	s.meta = renderServerMeta(protocol.ServerMetadata(opts.ServerID))
	s.router = s.routes() // also gives Options.Trace its default
	s.pipe = infer.Pipeline{Core: c, Trace: s.opts.Trace, Logs: s.logs, Log: s.log, Forward: opts.HeaderForward}
	s.handler = Recover(LogRequests(inferRouter{s: s, router: s.router}, s.logs, s.log), s.log, nil)
	return s
}

// Router is the chi router, for platform frontends that add routes.
func (s *Server) Router() chi.Router { return s.router }

// ServeHTTP implements http.Handler: the router, behind Recover, so a
// panic in any route (Lambda's included) is a 500 for its request only.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Pipeline is the inference pipeline of the API's /infer route, for
// platform frontends whose own request formats (Vertex AI's instances) run
// through the same steps.
func (s *Server) Pipeline() *infer.Pipeline { return &s.pipe }

// InferLoadReport is /infer's load report step for the reply w to r (nil
// when load reports are off), for a platform frontend's infer call.
func (s *Server) InferLoadReport(w http.ResponseWriter, r *http.Request) infer.Report {
	return s.inferLoadReport(w, r)
}

// Work takes one of the Options.Workers slots (--http-thread-count) for a
// platform frontend's decoding or rendering of an infer call, as /infer's
// own steps take one; release gives it back.
func (s *Server) Work() (release func()) { return s.work() }

// MaxInputSize is --http-max-input-size.
func (s *Server) MaxInputSize() int64 { return s.opts.MaxInputSize }

// SetExiting makes health answer 503 "Server exiting" during a drain.
func (s *Server) SetExiting() { s.exiting.Store(true) }

// Core returns the inference core the API serves.
func (s *Server) Core() *core.Server { return s.core }

// Reroute copies r for another route of this server, as the platform
// frontends translate their routes: method and path replaced, and chi's
// routing state cleared, since a route context left by an enclosing router
// would make the base router act as its sub-router.
func Reroute(r *http.Request, method, path string) *http.Request {
	fwd := r.Clone(context.WithValue(r.Context(), chi.RouteCtxKey, nil))
	fwd.Method = method
	fwd.URL.Path, fwd.URL.RawPath, fwd.RequestURI = path, "", path
	return fwd
}

// Restricted answers Triton's 403 and reports true when r lacks the header
// --http-restricted-api requires for category ("inference",
// "model-repository", "health", ...). The platform frontends call it before
// their own payload errors, which Triton reports only after this check.
func (s *Server) Restricted(w http.ResponseWriter, r *http.Request, category string) bool {
	if err := s.restricted(r, category); err != nil {
		RenderError(w, err)
		return true
	}
	return false
}

// restricted is Triton's 403 when r lacks the header --http-restricted-api
// requires for category; nil otherwise.
func (s *Server) restricted(r *http.Request, category string) error {
	res, ok := s.opts.Restricted[category]
	if !ok {
		return nil
	}
	if got, present := r.Header[http.CanonicalHeaderKey(res.Key)]; present && len(got) > 0 && got[0] == res.Value {
		return nil
	}
	return &StatusError{http.StatusForbidden, "This API is restricted, expecting header '" + res.Key + "'"}
}

// handle adapts a route's handler: the checks Triton runs after routing
// and before anything else, the restricted-API header (403) then the
// method (405), then the handler; the first error is the route's answer,
// rendered here.
func (s *Server) handle(category string, methods []string, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := s.restricted(r, category)
		if err == nil && !slices.Contains(methods, r.Method) {
			err = errMethodNotAllowed
		}
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			RenderError(w, err)
		}
	}
}

var (
	getOnly  = []string{http.MethodGet}
	postOnly = []string{http.MethodPost}
)

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { RenderError(w, errNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) { RenderError(w, errMethodNotAllowed) })
	r.HandleFunc("/v2/health/live", s.handle("health", getOnly, s.live))
	r.HandleFunc("/v2/health/ready", s.handle("health", getOnly, s.ready))
	r.HandleFunc("/v2", s.handle("metadata", getOnly, s.serverMeta))
	r.HandleFunc("/v2/models/stats", s.handle("statistics", getOnly, s.stats))
	r.HandleFunc("/v2/logging", s.handle("logging", []string{http.MethodGet, http.MethodPost}, s.logSettings))

	model := func(suffix, category string, methods []string, h func(http.ResponseWriter, *http.Request, string, int64) error) {
		wrapped := s.handle(category, methods, func(w http.ResponseWriter, r *http.Request) error {
			name := chi.URLParam(r, "model")
			// The route admits only digits: "" (no version) or a
			// number, out of range at worst.
			version, err := protocol.ParseVersion(chi.URLParam(r, "version"))
			if err != nil {
				return err
			}
			return h(w, r, name, version)
		})
		r.HandleFunc("/v2/models/{model}"+suffix, wrapped)
		r.HandleFunc("/v2/models/{model}/versions/{version:[0-9]+}"+suffix, wrapped)
	}
	model("", "metadata", getOnly, s.modelMeta)
	model("/ready", "health", getOnly, s.modelReady)
	model("/config", "model-config", getOnly, s.modelConfig)
	model("/stats", "statistics", getOnly, s.modelStats)
	model("/infer", "inference", postOnly, s.infer)
	model("/generate", "inference", postOnly, s.generate)
	model("/generate_stream", "inference", postOnly, s.generateStream)

	r.HandleFunc("/v2/repository/index", s.handle("model-repository", postOnly, s.repoIndex))
	r.HandleFunc("/v2/repository/{repo}/index", s.handle("model-repository", postOnly, s.repoIndex))
	r.HandleFunc("/v2/repository/models/{model}/load", s.handle("model-repository", postOnly, s.repoLoad))
	r.HandleFunc("/v2/repository/models/{model}/unload", s.handle("model-repository", postOnly, s.repoUnload))
	named := s.handle("model-repository", postOnly, func(http.ResponseWriter, *http.Request) error {
		return protocol.ErrRepositoryName
	})
	r.HandleFunc("/v2/repository/{repo}/models/{model}/load", named)
	r.HandleFunc("/v2/repository/{repo}/models/{model}/unload", named)
	s.sharedMemoryRoutes(r)
	s.traceRoutes(r)
	return r
}

// work takes one of the Options.Workers slots for decoding or encoding a
// request; release gives it back.
func (s *Server) work() (release func()) {
	if s.workers == nil {
		return func() {}
	}
	s.workers <- struct{}{}
	return func() { <-s.workers }
}

// decode runs one decoding step in a worker slot. A request whose client
// has gone, or goes while it waits for a slot, is not decoded: that would
// be work for nobody.
func (s *Server) decode(ctx context.Context, f func() (*codec.Envelope, error)) (*codec.Envelope, error) {
	gone := func() error {
		return core.Errorf(core.CodeCancelled, "request cancelled before its body was decoded: %v", ctx.Err())
	}
	if ctx.Err() != nil {
		return nil, gone()
	}
	if s.workers != nil {
		select {
		case s.workers <- struct{}{}:
			defer func() { <-s.workers }()
		case <-ctx.Done():
			return nil, gone()
		}
	}
	return f()
}
