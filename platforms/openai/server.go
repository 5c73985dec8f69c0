package openai

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
)

// Options configure the routes.
type Options struct {
	// Keys are the accepted API keys; nil or empty: no key needed.
	Keys   *Keys
	Logger *slog.Logger
}

// Server serves the OpenAI and TEI routes over the HTTP API api.
type Server struct {
	api    *httpapi.Server
	core   *core.Server
	keys   *Keys
	log    *slog.Logger
	models *descriptions
	index  indexCache // the ready models, for /v1/models and the TEI routes' default
	gens   generators // the generation routes' per-version state (chat_model.go)
}

// New builds the routes over api; Mount adds them to a router.
func New(api *httpapi.Server, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Keys != nil && opts.Keys.log == nil {
		opts.Keys.log = opts.Logger // before any request reads it
	}
	return &Server{api: api, core: api.Core(), keys: opts.Keys, log: opts.Logger, models: newDescriptions()}
}

// Mount adds the routes to r, the HTTP API's router (httpapi.Server.Router),
// so that they are served on the HTTP port beside the v2 routes.
func (s *Server) Mount(r chi.Router) {
	r.HandleFunc("/v1/models", s.handle(openAI, http.MethodGet, "metadata", s.listModels))
	r.HandleFunc("/v1/models/{id}", s.handle(openAI, http.MethodGet, "metadata", s.getModel))
	// Each group of routes adds itself here: the encoder routes
	// (embeddings, rerank, tokenize) and the generation routes (chat and
	// completions).
	s.mountEncoders(r)
	s.mountGenerators(r)
}

// route is a handler that writes its answer or returns the error the
// route answers in its family's shape.
type route func(w http.ResponseWriter, r *http.Request) error

// handle adapts a route: the API key (401), then --http-restricted-api's
// header for category (Triton's 403, as the v2 routes answer it), then the
// method (405), then the route.
func (s *Server) handle(fam family, method, category string, h route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.keys.Check(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, fam, errUnauthorized)
			return
		}
		if s.api.Restricted(w, r, category) {
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, fam, errMethod)
			return
		}
		if err := h(w, r); err != nil {
			writeError(w, fam, err)
		}
	}
}

// decode reads r's JSON body into v, at most --http-max-input-size bytes
// of it (a longer body is a 413).
func (s *Server) decode(r *http.Request, v any) error {
	body, err := httpapi.ReadBody(r, s.api.MaxInputSize())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return invalid("", "the request body is not valid JSON for this route: %v", err)
	}
	return nil
}

// mountEncoders adds the encoder routes: OpenAI's embeddings and rerank,
// TEI's embed, rerank and tokenize.
func (s *Server) mountEncoders(r chi.Router) {
	r.HandleFunc("/v1/embeddings", s.handle(openAI, http.MethodPost, "inference", s.embeddings))
	r.HandleFunc("/v1/rerank", s.handle(openAI, http.MethodPost, "inference", s.rerank))
	r.HandleFunc("/embed", s.handle(tei, http.MethodPost, "inference", s.teiEmbed))
	r.HandleFunc("/rerank", s.handle(tei, http.MethodPost, "inference", s.teiRerank))
	r.HandleFunc("/tokenize", s.handle(tei, http.MethodPost, "inference", s.teiTokenize))
}
