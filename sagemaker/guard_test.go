package sagemaker

import (
	"bytes"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// TestUnloadDeadline: an MME unload whose model stays in use answers
// within its deadline (SageMaker gives it 360 s), logging the delay as
// Triton does, and the model finishes unloading once its last request
// ends.
func TestUnloadDeadline(t *testing.T) {
	e, root := mme(t, httpapi.Options{})
	var logs bytes.Buffer
	e.h.log = slog.New(slog.NewTextHandler(&logs, nil))
	e.h.unloadTimeout = 300 * time.Millisecond
	writeModel(t, filepath.Join(root, "busy", "model"), idConfig, idONNX)
	e.do(t, http.MethodPost, "/models", nil, loadBody("busy", root+"/busy/model")).expect(t, "load", 200, "")
	// A request in flight that never ends (until released).
	_, release, err := e.core.Acquire("busy", core.LatestVersion)
	must(t, err)
	replied := make(chan reply, 1)
	go func() { replied <- e.do(t, http.MethodDelete, "/models/busy", nil, "") }()
	select {
	case r := <-replied:
		r.expect(t, "unload of a busy model", 200, "")
	case <-time.After(10 * time.Second):
		t.Fatal("the unload waits for the busy model without a deadline")
	}
	if !strings.Contains(logs.String(), "not unloaded in time") {
		t.Errorf("the delay is not logged:\n%s", logs.String())
	}
	e.do(t, http.MethodGet, "/models/busy", nil, "").expect(t, "forgotten", 404, "")
	release()
	deadline := time.Now().Add(10 * time.Second)
	for e.core.ModelReady("busy", core.LatestVersion) || !unloadedNow(t, e, "busy") {
		if time.Now().After(deadline) {
			t.Fatal("model not unloaded after its last request")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func unloadedNow(t *testing.T, e *env, name string) bool {
	entries, err := e.core.Index(t.Context(), false)
	return err == nil && unloaded(entries, name)
}

// postEndless sends an endless chunked body and returns the reply.
func postEndless(t *testing.T, rawURL string) (int, string) {
	t.Helper()
	r := servertest.SendBody(rawURL, nil, &servertest.Zeros{N: -1}, -1)
	must(t, r.Err)
	return r.Status, r.Body
}

// TestBodyLimits: /invocations and MME invoke bodies are read no further
// than --http-max-input-size: an endless body is answered.
func TestBodyLimits(t *testing.T) {
	e, root := mme(t, httpapi.Options{MaxInputSize: 1 << 20})
	writeModel(t, filepath.Join(root, "m", "model"), idConfig, idONNX)
	e.do(t, http.MethodPost, "/models", nil, loadBody("m", root+"/m/model")).expect(t, "load", 200, "")
	tooLarge := `{"error":"request JSON size of 1048577 bytes exceeds the maximum allowed input size of 1048576 bytes. Use --http-max-input-size to increase the limit."}`
	single := t.TempDir()
	writeModel(t, filepath.Join(single, "m"), idConfig, idONNX)
	sme := start(t, setup{repo: single, startup: []string{"m"}, api: httpapi.Options{MaxInputSize: 1 << 20}, sm: Options{DefaultModel: "m"}})
	for _, u := range []string{e.url + "/models/m/invoke", sme.url + "/invocations"} {
		if status, body := postEndless(t, u); status != 400 || body != tooLarge {
			t.Errorf("%s: %d %s", u, status, body)
		}
	}
	status, body := postEndless(t, e.url+"/models")
	if status != 400 || !strings.Contains(body, "failed to read the request body") {
		t.Errorf("load: %d %s", status, body)
	}
}

// TestMMELoadBodyLimit: a load body is read no further than 1 MiB.
func TestMMELoadBodyLimit(t *testing.T) {
	e, _ := mme(t, httpapi.Options{})
	e.do(t, http.MethodPost, "/models", nil, strings.Repeat(" ", maxLoadBody+1)).
		expectError(t, "oversized load body", 400, "failed to read the request body")
}

// TestRecover: a panic in a request's path answers 500 naming the model,
// and the listener keeps serving.
func TestRecover(t *testing.T) {
	root := t.TempDir()
	writeModel(t, filepath.Join(root, "m"), idConfig, idONNX)
	// An inference type the base server has no route for, mounted
	// below to fail the way a bug would.
	e := start(t, setup{repo: root, startup: []string{"m"}, sm: Options{DefaultModel: "m", InferenceType: "boom"}})
	e.api.Router().HandleFunc("/v2/models/{model}/boom", func(http.ResponseWriter, *http.Request) { panic("bug") })
	e.do(t, http.MethodPost, "/invocations", nil, "{}").
		expect(t, "panic", 500, `{"error":"failed to process the request for model 'm': internal error: bug"}`)
	e.do(t, http.MethodGet, "/ping", nil, "").expect(t, "still serving", 200, "")
	for path, want := range map[string]string{"/invocations": "m", "/models/x/invoke": "x", "/models/x": "x", "/ping": "", "/models": ""} {
		r, _ := http.NewRequest(http.MethodPost, "http://h"+path, nil)
		if got := e.h.modelOf(r); got != want {
			t.Errorf("modelOf(%s) = %q, want %q", path, got, want)
		}
	}
}
