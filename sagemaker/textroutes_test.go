package sagemaker

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/platforms/openai"
)

// TestCustomRoute reads the route out of CustomAttributes, among others,
// and only for the text routes.
func TestCustomRoute(t *testing.T) {
	for attrs, want := range map[string]string{
		"route=/v1/embeddings":                  "/v1/embeddings",
		"accept_eula=true; route = /embed":      "/embed",
		"a=b,route=/v1/rerank,c=d":              "/v1/rerank",
		"route=/v2/models/x/infer":              "",
		"route=/v1/embeddings/../../v2/logging": "",
		"route":                                 "",
		"":                                      "",
	} {
		if got := customRoute(attrs); got != want {
			t.Errorf("customRoute(%q) = %q, want %q", attrs, got, want)
		}
	}
}

// TestInvocationsTextRoutes: /invocations with CustomAttributes
// "route=<path>" is served by the OpenAI or TEI route (platforms/openai
// mounted on the base API, as cmd/inferd mounts it), with its own body and
// errors; without it /invocations stays the default model's v2 inference.
func TestInvocationsTextRoutes(t *testing.T) {
	root := t.TempDir()
	must(t, os.CopyFS(filepath.Join(root, "embedder"), os.DirFS("../examples/model_repository/embedder")))
	e := start(t, setup{repo: root, startup: []string{"embedder"}, sm: Options{DefaultModel: "embedder", InferenceType: "infer"}})
	openai.New(e.api, openai.Options{}).Mount(e.api.Router())
	attrs := func(route string) map[string]string {
		return map[string]string{"Content-Type": "application/json", customAttributes: "route=" + route}
	}
	r := e.do(t, http.MethodPost, "/invocations", attrs("/v1/embeddings"), `{"model":"embedder","input":["hello world","hi"]}`)
	if r.status != 200 || !strings.Contains(r.body, `"object":"list"`) || strings.Count(r.body, `"object":"embedding"`) != 2 {
		t.Errorf("embeddings: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, "/invocations", attrs("/embed"), `{"inputs":"hello world"}`)
	if r.status != 200 || !strings.HasPrefix(r.body, "[[") {
		t.Errorf("TEI embed: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, "/invocations", attrs("/v1/embeddings"), `{"model":"nope","input":"hi"}`)
	if r.status != 404 || !strings.Contains(r.body, `"code":"model_not_found"`) {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
	// A v2 body without the attribute is the default model's inference.
	r = e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": "application/json"}, `{"inputs":[]}`)
	if r.status != 400 || !strings.Contains(r.body, `{"error":`) {
		t.Errorf("v2 body: %d %s", r.status, r.body)
	}
}
