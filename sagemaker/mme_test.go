package sagemaker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
)

// mme starts an endpoint as `serve` does in MME mode: an empty placeholder
// repository, live pings, and ModelsRoot at a temporary directory.
func mme(t *testing.T, api httpapi.Options) (*env, string) {
	t.Helper()
	root := t.TempDir()
	return start(t, setup{api: api, sm: Options{PingMode: "live", ModelsRoot: root}}), root
}

func loadBody(id, url string) string {
	b, _ := json.Marshal(map[string]string{"model_name": id, "url": url})
	return string(b)
}

var idRequest = `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`

func TestMMELifecycle(t *testing.T) {
	e, root := mme(t, httpapi.Options{})
	// Nothing loaded, live ping is 200 (triton-inference-server/server
	// qa/L0_sagemaker/test.sh, sagemaker_multi_model_test.py).
	e.do(t, http.MethodGet, "/ping", nil, "").expect(t, "ping", 200, "")

	// Case A: config.pbtxt at the url root.
	writeModel(t, filepath.Join(root, "aaa", "model"), simpleConfig, simpleONNX)
	// Case B: url is a repository; its ensemble or only folder is the model.
	writeModel(t, filepath.Join(root, "bbb", "model", "idmodel"), idConfig, idONNX)
	// Case A on a sub-directory url (Triton quirk fixed).
	writeModel(t, filepath.Join(root, "ccc", "model", "sub"), idConfig, idONNX)

	urlA, urlB, urlC := root+"/aaa/model", root+"/bbb/model/", root+"/ccc/model/sub"
	// No target header → served as the id.
	e.do(t, http.MethodPost, "/models", map[string]string{"Content-Type": ctJSON}, loadBody("a", urlA)).expect(t, "load A", 200, "")
	// The target header names the served model.
	e.do(t, http.MethodPost, "/models", map[string]string{"X-Amzn-SageMaker-Target-Model": "served_b"}, loadBody("b", urlB)).expect(t, "load B", 200, "")
	e.do(t, http.MethodPost, "/models", nil, loadBody("c", urlC)).expect(t, "load C", 200, "")

	// The same load again, and another id over a registered url: 409.
	e.do(t, http.MethodPost, "/models", nil, loadBody("a", urlA)).expectError(t, "load A again", 409, "")
	e.do(t, http.MethodPost, "/models", nil, loadBody("a2", urlA)).expectError(t, "same url other id", 409, "already been registered")

	// List and get: {"modelName","modelUrl"}.
	r := e.do(t, http.MethodGet, "/models", nil, "")
	var list struct{ Models []map[string]string }
	must(t, json.Unmarshal([]byte(r.body), &list))
	sort.Slice(list.Models, func(i, j int) bool { return list.Models[i]["modelName"] < list.Models[j]["modelName"] })
	want := []map[string]string{
		{"modelName": "a", "modelUrl": root + "/aaa"},
		{"modelName": "b", "modelUrl": root + "/bbb/model"},
		{"modelName": "c", "modelUrl": root + "/ccc/model"},
	}
	if r.status != 200 || r.header.Get("Content-Type") != ctJSON || !equalMaps(list.Models, want) {
		t.Errorf("list: %d %s", r.status, r.body)
	}
	e.do(t, http.MethodGet, "/models/b", nil, "").expect(t, "get b", 200, `{"modelName":"b","modelUrl":"`+root+`/bbb/model"}`)
	e.do(t, http.MethodGet, "/models/b/invoke", nil, "").expect(t, "get via invoke path", 200, "*")
	e.do(t, http.MethodGet, "/models/zzz", nil, "").expect(t, "get unknown", 404, "")

	// model_name is the served name.
	r = e.do(t, http.MethodPost, "/models/a/invoke", map[string]string{"Content-Type": ctJSON}, simpleJSON)
	if r.status != 200 || !strings.HasPrefix(r.body, `{"model_name":"a","model_version":"1"`) {
		t.Errorf("invoke a: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, "/models/b/invoke", map[string]string{"X-Amzn-SageMaker-Target-Model": "served_b"}, idRequest)
	if r.status != 200 || !strings.HasPrefix(r.body, `{"model_name":"served_b"`) {
		t.Errorf("invoke b: %d %s", r.status, r.body)
	}
	// Without the header the name recorded at load is used.
	r = e.do(t, http.MethodPost, "/models/b/invoke", nil, idRequest)
	if r.status != 200 || !strings.HasPrefix(r.body, `{"model_name":"served_b"`) {
		t.Errorf("invoke b without header: %d %s", r.status, r.body)
	}
	// SageMaker binary content type in and out.
	bin, hlen := simpleBinary()
	r = e.do(t, http.MethodPost, "/models/a/invoke", map[string]string{"Content-Type": binaryMIME + itoa(hlen)}, bin)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), binaryMIME) || r.header.Get("Inference-Header-Content-Length") != "" {
		t.Errorf("invoke binary: %d %v", r.status, r.header)
	}
	// An id that is not loaded: 404, empty body.
	e.do(t, http.MethodPost, "/models/zzz/invoke", nil, idRequest).expect(t, "invoke unknown id", 404, "")

	// Every failure is 400, OOM markers 507 (src/sagemaker_server.cc).
	fails := []struct {
		name, target, ct, body string
		status                 int
	}{
		{"unknown served model", "nope", "", idRequest, 400},
		{"unroutable served model", "x/y.tar.gz", "", idRequest, 400},
		{"malformed json", "", "", "{", 400},
		{"wrong datatype", "", "", strings.Replace(idRequest, "FP32", "INT32", 1), 400},
		{"bad content type", "", binaryMIME + "x", idRequest, 400},
		{"oom marker", "CUDA out of memory", "", idRequest, 507},
	}
	for _, f := range fails {
		h := map[string]string{}
		if f.target != "" {
			h["X-Amzn-SageMaker-Target-Model"] = f.target
		}
		if f.ct != "" {
			h["Content-Type"] = f.ct
		}
		e.do(t, http.MethodPost, "/models/b/invoke", h, f.body).expectError(t, f.name, f.status, "")
	}

	// DELETE answers after the model is unloaded.
	e.do(t, http.MethodDelete, "/models/b", nil, "").expect(t, "unload b", 200, "")
	if e.core.ModelReady("served_b", core.LatestVersion) {
		t.Error("served_b still ready after DELETE")
	}
	e.do(t, http.MethodGet, "/models/b", nil, "").expect(t, "get after unload", 404, "")
	e.do(t, http.MethodPost, "/models/b/invoke", nil, idRequest).expect(t, "invoke after unload", 404, "")
	e.do(t, http.MethodDelete, "/models/b", nil, "").expect(t, "unload again", 404, "")
	// The repository was unregistered, so the artifact loads again.
	e.do(t, http.MethodPost, "/models", map[string]string{"X-Amzn-SageMaker-Target-Model": "served_b"}, loadBody("b", urlB)).expect(t, "reload B", 200, "")
	e.do(t, http.MethodPost, "/models/b/invoke", nil, idRequest).expect(t, "invoke reloaded", 200, "*")
	e.do(t, http.MethodGet, "/ping", nil, "").expect(t, "ping", 200, "")
}

func TestMMELoadErrors(t *testing.T) {
	e, root := mme(t, httpapi.Options{})
	writeModel(t, filepath.Join(root, "ok", "model"), idConfig, idONNX)
	writeModel(t, filepath.Join(root, "broken", "model"), idConfig, []byte("not onnx"))
	must(t, os.MkdirAll(filepath.Join(root, "empty", "model"), 0o755))
	wd, _ := os.Getwd()

	cases := []struct {
		name   string
		body   string
		target string
		status int
		msg    string // "" with status 400: empty body
	}{
		// Not JSON.
		{"not json", "{model_name", "", 400, "failed to parse the request JSON buffer"},
		{"non-string name", `{"model_name":1,"url":"x"}`, "", 400, "model_name"},
		{"empty body", "", "", 400, `Invalid \"url\" ''`},
		// url outside /opt/ml/models/<id>/model[/<sub>].
		{"outside root", loadBody("x", "/opt/ml/models/ok/model"), "", 400, `Invalid \"url\"`},
		{"dash in segment", loadBody("x", root+"/a-b/model"), "", 400, `Invalid \"url\"`},
		{"trailing slash after sub", loadBody("x", root+"/ok/model/sub/"), "", 400, `Invalid \"url\"`},
		{"not model", loadBody("x", root+"/ok/other"), "", 400, `Invalid \"url\"`},
		{"relative", loadBody("x", "ok/model"), "", 400, `Invalid \"url\" 'ok/model'`},
		// url that normalises into /dev/, /proc/ or /sys/.
		{"dev", loadBody("x", "/dev/null"), "", 400, ""},
		{"proc via dots", loadBody("x", root+"/../../../proc/self"), "", 400, ""},
		{"sys relative", loadBody("x", strings.Repeat("../", strings.Count(wd, "/"))+"sys/kernel"), "", 400, ""},
		// No folder to serve.
		{"no model dir", loadBody("x", root+"/empty/model"), "", 400, "no model directory"},
		// Load failure 400, OOM 507.
		{"load failure", loadBody("x", root+"/broken/model"), "", 400, "load failed"},
		{"oom", loadBody("y", root+"/broken/model"), "OOM_model", 507, "OOM_model"},
	}
	for _, c := range cases {
		h := map[string]string{}
		if c.target != "" {
			h["X-Amzn-SageMaker-Target-Model"] = c.target
		}
		r := e.do(t, http.MethodPost, "/models", h, c.body)
		if c.msg == "" {
			r.expect(t, c.name, c.status, "")
		} else {
			r.expectError(t, c.name, c.status, c.msg)
		}
	}
	// A failed load leaves nothing behind: the fixed artifact loads under
	// the same id and url.
	writeModel(t, filepath.Join(root, "broken", "model"), idConfig, idONNX)
	e.do(t, http.MethodPost, "/models", nil, loadBody("x", root+"/broken/model")).expect(t, "retry", 200, "")
	e.do(t, http.MethodPost, "/models/x/invoke", nil, idRequest).expect(t, "invoke retried", 200, "*")
	// POST /models/{m} without /invoke is a load (Triton quirk, mirrored).
	e.do(t, http.MethodPost, "/models/whatever", nil, loadBody("ok", root+"/ok/model")).expect(t, "load via /models/{m}", 200, "")
	e.do(t, http.MethodGet, "/models/ok", nil, "").expect(t, "get", 200, "*")
	// Strict readiness is not disturbed by the failed loads.
	if !e.core.Ready() {
		t.Error("core not ready after failed loads were cleaned up")
	}
}

func TestMMERestrictions(t *testing.T) {
	e, root := mme(t, httpapi.Options{Restricted: map[string]httpapi.Restriction{
		"model-repository": {Key: "X-Repo", Value: "r"},
		"inference":        {Key: "X-Infer", Value: "i"},
	}})
	writeModel(t, filepath.Join(root, "m1", "model"), idConfig, idONNX)
	repoOK := map[string]string{"X-Repo": "r"}
	// model-repository restricted: every MME route but invoke is 403.
	for _, hdr := range []map[string]string{nil, {"X-Repo": "wrong"}} {
		for _, c := range []struct{ method, path, body string }{
			{http.MethodGet, "/models", ""},
			{http.MethodGet, "/models/x", ""},
			{http.MethodPost, "/models", loadBody("m1", root+"/m1/model")},
			{http.MethodDelete, "/models/x", ""},
		} {
			e.do(t, c.method, c.path, hdr, c.body).expect(t, c.method+" "+c.path, 403, `{"error":"This API is restricted, expecting header 'X-Repo'"}`)
		}
	}
	e.do(t, http.MethodPost, "/models", repoOK, loadBody("m1", root+"/m1/model")).expect(t, "load", 200, "")
	e.do(t, http.MethodGet, "/models", repoOK, "").expect(t, "list", 200, `{"models":[{"modelName":"m1","modelUrl":"`+root+`/m1"}]}`)
	// inference restricted: invoke is 403 without the header; an unknown id
	// is 404 before the restriction check.
	e.do(t, http.MethodPost, "/models/m1/invoke", nil, idRequest).expect(t, "invoke", 403, `{"error":"This API is restricted, expecting header 'X-Infer'"}`)
	e.do(t, http.MethodPost, "/models/m1/invoke", map[string]string{"X-Infer": "i"}, idRequest).expect(t, "invoke ok", 200, "*")
	e.do(t, http.MethodPost, "/models/m1/invoke", map[string]string{"Content-Type": binaryMIME + "x"}, idRequest).expect(t, "invoke bad type", 403, "*")
	e.do(t, http.MethodPost, "/models/zz/invoke", nil, idRequest).expect(t, "invoke unknown", 404, "")
	// /ping stays open.
	e.do(t, http.MethodGet, "/ping", nil, "").expect(t, "ping", 200, "")
	e.do(t, http.MethodDelete, "/models/m1", repoOK, "").expect(t, "unload", 200, "")
}

// TestMMEEnsembleSelection: the ensemble folder is picked in Case B. inferd's core
// does not run ensembles yet, so loading one fails with 400.
func TestMMEEnsembleSelection(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a_step", "pipeline", "z_step"} {
		must(t, os.MkdirAll(filepath.Join(dir, n), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(dir, "a_step", "config.pbtxt"), []byte(idConfig), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "pipeline", "config.pbtxt"), []byte("name: \"pipeline\"\nplatform:   \"ensemble\"\n"), 0o644))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	repoPath, modelDir, err := resolveModelDir(dir, log)
	if err != nil || repoPath != dir || modelDir != "pipeline" {
		t.Fatalf("ensemble: %s %s %v", repoPath, modelDir, err)
	}
	// Without an ensemble, several folders: the lexicographically last.
	must(t, os.Remove(filepath.Join(dir, "pipeline", "config.pbtxt")))
	if _, modelDir, _ = resolveModelDir(dir, log); modelDir != "z_step" {
		t.Fatalf("no ensemble: %s", modelDir)
	}

	e, root := mme(t, httpapi.Options{})
	writeModel(t, filepath.Join(root, "ens", "model", "step"), idConfig, idONNX)
	must(t, os.MkdirAll(filepath.Join(root, "ens", "model", "pipeline"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "ens", "model", "pipeline", "config.pbtxt"), []byte(`platform: "ensemble"`+"\n"), 0o644))
	e.do(t, http.MethodPost, "/models", map[string]string{"X-Amzn-SageMaker-Target-Model": "ens"}, loadBody("ens", root+"/ens/model")).
		expectError(t, "ensemble load", 400, "")
}

func TestUnloadWait(t *testing.T) {
	ready := []core.IndexEntry{{Name: "m", Version: 1, State: core.StateReady}}
	gone := []core.IndexEntry{{Name: "m", Version: 1, State: core.StateUnavailable, Reason: "unloaded"}, {Name: "other", Version: 1, State: core.StateReady}}
	if unloaded(ready, "m") || !unloaded(gone, "m") || !unloaded(nil, "m") {
		t.Error("unloaded()")
	}
	// A model that stays READY makes the wait give up after the timeout.
	root := t.TempDir()
	writeModel(t, filepath.Join(root, "m"), idConfig, idONNX)
	e := start(t, setup{repo: root, startup: []string{"m"}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if e.h.waitUnloaded(ctx, "m") {
		t.Error("waitUnloaded reported a READY model unloaded")
	}
	if d := time.Since(begin); d < 40*time.Millisecond || d > 5*time.Second {
		t.Errorf("waited %v", d)
	}
	must(t, e.core.Unload(context.Background(), "m"))
	if !e.h.waitUnloaded(context.Background(), "m") {
		t.Error("waitUnloaded after Unload")
	}
}

func TestOOMMarkers(t *testing.T) {
	for _, m := range oomMarkers {
		if !hasOOMMarker("load failed: " + m + " while creating session") {
			t.Errorf("%q not detected", m)
		}
	}
	for _, s := range []string{"load failed", "oom", "cuda OUT of memory", "Stub is unhealthy"} {
		if hasOOMMarker(s) {
			t.Errorf("%q detected as OOM", s)
		}
	}
}

func equalMaps(a, b []map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k, v := range a[i] {
			if b[i][k] != v {
				return false
			}
		}
	}
	return true
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
