package httpapi

import (
	"net/http"
	"strings"

	"github.com/inferd/inferd/platforms/protocol"
)

// inferRouter serves POST /v2/models/{model}[/versions/{version}]/infer
// itself and hands every other request to the chi router. The router
// costs an /infer call about a microsecond and three allocations (a
// request copy with its routing context, the path values), a tenth of
// what the frontend adds to a small model's request; this route answers
// exactly as the router's does (same checks, order and handler), which
// TestInferRouteMatchesRouter pins against the router itself. Anything
// it does not recognise plainly, an escaped path included, goes to the
// router.
type inferRouter struct {
	s      *Server
	router http.Handler
}

func (ir inferRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.RawPath == "" {
		if name, version, ok := inferPath(r.URL.Path); ok {
			ir.s.serveInfer(w, r, name, version)
			return
		}
	}
	ir.router.ServeHTTP(w, r)
}

// serveInfer is the router's /infer route (routes: handle with the
// "inference" category, POST only, then the version) for a path that
// inferPath split.
func (s *Server) serveInfer(w http.ResponseWriter, r *http.Request, name, versionText string) {
	err := s.restricted(r, "inference")
	if err == nil {
		var version int64
		if version, err = protocol.ParseVersion(versionText); err == nil {
			err = s.infer(w, r, name, version)
		}
	}
	if err != nil {
		RenderError(w, err)
	}
}

// inferPath splits /v2/models/{model}/infer and
// /v2/models/{model}/versions/{digits}/infer, the router's two /infer
// patterns, into the model and version text; ok is false for any other
// path, and for an empty model, which the router then decides on.
func inferPath(path string) (name, version string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v2/models/")
	if !found {
		return "", "", false
	}
	rest, found = strings.CutSuffix(rest, "/infer")
	if !found {
		return "", "", false
	}
	name, version, versioned := strings.Cut(rest, "/versions/")
	if name == "" || strings.IndexByte(name, '/') >= 0 {
		return "", "", false
	}
	if versioned && (version == "" || strings.Trim(version, "0123456789") != "") {
		return "", "", false
	}
	return name, version, true
}
