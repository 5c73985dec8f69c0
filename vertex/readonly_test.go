package vertex

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inferd/inferd/platforms/httpapi"
)

// baseGet answers GET path from the base server directly (not through
// Vertex), so a test can compare the server's state before and after.
func baseGet(t *testing.T, api *httpapi.Server, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("X-Auth", "secret") // the tests' restriction header
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestRedirectWriteRoutes: every base route that changes the server is
// out of reach through X-Vertex-Ai-Triton-Redirect. Model load/unload and
// shared-memory registration answer 403 with no body, whatever the
// restriction headers (triton-inference-server/server
// src/vertex_ai_server.cc: only read-only targets pass); the log and trace
// settings are no redirect targets at all (400). The bodies are the ones a
// client sends to the native routes, and the server's state is unchanged
// afterwards.
func TestRedirectWriteRoutes(t *testing.T) {
	restricted := map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "model-repository,shared-memory,logging,trace:X-Auth=secret"))
	c, api := startCore(t, map[string]testModel{"simple": simpleModel, "id1": id1Model}, httpapi.Options{Restricted: restricted})
	_, base := listen(t, c, api, "simple", true)

	state := func() []string {
		return []string{
			baseGet(t, api, "/v2/models/id1/ready"), baseGet(t, api, "/v2/models/simple/config"),
			baseGet(t, api, "/v2/systemsharedmemory/status"), baseGet(t, api, "/v2/cudasharedmemory/status"),
			baseGet(t, api, "/v2/logging"), baseGet(t, api, "/v2/trace/setting"), baseGet(t, api, "/v2/models/simple/trace/setting"),
		}
	}
	before := state()

	loadBody := `{"parameters":{"config":"{\"max_batch_size\":1}","file:1/model.onnx":"AAAA"}}`
	shmBody := `{"key":"/x","offset":0,"byte_size":64}`
	cudaBody := `{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":64}`
	for _, c := range []struct{ target, body string }{
		{"v2/repository/models/id1/unload", `{"parameters":{"unload_dependents":true}}`},
		{"v2/repository/models/id1/load", loadBody},
		{"v2/repository/models/simple/load", ""},
		{"v2/repository/models/new/load", loadBody},
		{"v2/repository/main/models/id1/unload", ""},
		{"v2/repository/main/models/id1/load", ""},
		{"v2/systemsharedmemory/region/r/register", shmBody},
		{"v2/systemsharedmemory/region/r/unregister", ""},
		{"v2/systemsharedmemory/unregister", ""},
		{"v2/systemsharedmemory/register", shmBody},
		{"v2/cudasharedmemory/region/r/register", cudaBody},
		{"v2/cudasharedmemory/region/r/unregister", ""},
		{"v2/cudasharedmemory/unregister", ""},
		{"v2/cudasharedmemory/register", cudaBody},
	} {
		for _, auth := range []string{"", "secret"} {
			h := map[string]string{RedirectHeader: c.target, "Content-Type": "application/json"}
			if auth != "" {
				h["X-Auth"] = auth
			}
			status, _, body := do(t, http.MethodPost, base+predictRoute, h, c.body)
			if status != http.StatusForbidden || len(body) != 0 {
				t.Errorf("%s (auth %q): %d %q, want 403 and no body", c.target, auth, status, body)
			}
		}
	}
	for _, c := range []struct{ target, body string }{
		{"v2/logging", `{"log_verbose_level":3,"log_info":false}`},
		{"v2/trace/setting", `{"trace_level":["TIMESTAMPS"],"trace_rate":"1"}`},
		{"v2/models/simple/trace/setting", `{"trace_level":["TIMESTAMPS"]}`},
		{"v2/models/simple/versions/1/trace/setting", `{"trace_level":["TIMESTAMPS"]}`},
	} {
		h := map[string]string{RedirectHeader: c.target, "X-Auth": "secret"}
		if status, _, body := do(t, http.MethodPost, base+predictRoute, h, c.body); status != http.StatusBadRequest || len(body) != 0 {
			t.Errorf("%s: %d %q, want 400 and no body", c.target, status, body)
		}
	}
	after := state()
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("state changed through Vertex AI: %q -> %q", before[i], after[i])
		}
	}
	if status, _, b := do(t, http.MethodPost, base+predictRoute, redirect("v2/models/id1/infer"), id1Body); status != http.StatusOK {
		t.Fatalf("id1 after the refusals: %d %s", status, b)
	}
}
