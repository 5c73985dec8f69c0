package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInferPath: the paths inferRouter serves itself, and those it leaves
// to the router.
func TestInferPath(t *testing.T) {
	cases := []struct {
		path, name, version string
		ok                  bool
	}{
		{path: "/v2/models/simple/infer", name: "simple", ok: true},
		{path: "/v2/models/simple/versions/1/infer", name: "simple", version: "1", ok: true},
		{path: "/v2/models/simple/versions/007/infer", name: "simple", version: "007", ok: true},
		{path: "/v2/models/stats/infer", name: "stats", ok: true},
		{path: "/v2/models/versions/infer", name: "versions", ok: true},
		{path: "/v2/models/simple/versions//infer"},
		{path: "/v2/models/simple/versions/-1/infer"},
		{path: "/v2/models/simple/versions/1x/infer"},
		{path: "/v2/models//infer"},
		{path: "/v2/models/a/b/infer"},
		{path: "/v2/models/simple/infer/"},
		{path: "/v2/models/simple/generate"},
		{path: "/v2/models/simple"},
		{path: "/v2/models/infer"},
		{path: "/v1/models/simple/infer"},
		{path: ""},
	}
	for _, c := range cases {
		name, version, ok := inferPath(c.path)
		if ok != c.ok || name != c.name || version != c.version {
			t.Errorf("inferPath(%q) = %q, %q, %v; want %q, %q, %v", c.path, name, version, ok, c.name, c.version, c.ok)
		}
	}
}

// TestInferRouteMatchesRouter sends each request through the server (its
// own /infer route first) and through the chi router alone, and wants the
// same status, headers and body from both: the route changes nothing a
// client sees, restricted API, methods, odd paths and bad versions
// included.
func TestInferRouteMatchesRouter(t *testing.T) {
	restricted := map[string]Restriction{}
	must(t, ParseRestriction(restricted, "inference:infer-key=infer-value"))
	body := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	paths := []string{
		"/v2/models/simple/infer",
		"/v2/models/simple/versions/1/infer",
		"/v2/models/simple/versions/2/infer",
		"/v2/models/simple/versions/99999999999999999999/infer",
		"/v2/models/simple/versions/x/infer",
		"/v2/models/missing/infer",
		"/v2/models/stats/infer",
		"/v2/models/versions/infer",
		"/v2/models//infer",
		"/v2/models/sim%70le/infer",
		"/v2/models/a%2Fb/infer",
		"/v2/models/simple/infer/",
	}
	for _, opts := range []struct {
		name string
		api  Options
	}{{"open", Options{}}, {"restricted", Options{Restricted: restricted}}} {
		t.Run(opts.name, func(t *testing.T) {
			api, _ := newAPI(t, writeRepo(t, standardModels(t)), serverOpts{api: opts.api})
			for _, path := range paths {
				for _, method := range []string{http.MethodPost, http.MethodGet} {
					for _, key := range []string{"", "infer-value"} {
						serve := func(h http.Handler) *httptest.ResponseRecorder {
							r := httptest.NewRequest(method, path, strings.NewReader(body))
							if key != "" {
								r.Header.Set("infer-key", key)
							}
							w := httptest.NewRecorder()
							h.ServeHTTP(w, r)
							return w
						}
						got, want := serve(api), serve(api.Router())
						what := method + " " + path + " key=" + key
						if got.Code != want.Code || got.Body.String() != want.Body.String() {
							t.Errorf("%s: %d %s\nrouter: %d %s", what, got.Code, got.Body, want.Code, want.Body)
						}
						for _, h := range []string{"Content-Type", "Content-Length", "Inference-Header-Content-Length"} {
							if got.Header().Get(h) != want.Header().Get(h) {
								t.Errorf("%s: %s %q, router %q", what, h, got.Header().Get(h), want.Header().Get(h))
							}
						}
						if method == http.MethodPost && path == "/v2/models/simple/infer" && key != "" && got.Code != http.StatusOK {
							t.Errorf("%s: %d %s, want 200 (the comparison would prove little)", what, got.Code, got.Body)
						}
					}
				}
			}
		})
	}
}
