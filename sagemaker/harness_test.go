package sagemaker

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// Configs of the test models; none names itself, so any folder (or MME
// served name) works.
const (
	simpleConfig = `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	idConfig = `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	// ONNX Runtime refuses decoupled models; the test backend does not.
	decoupledConfig = `backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
model_transaction_policy { decoupled: true }
`
)

var (
	simpleONNX = onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	idONNX     = onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))
)

// writeModel writes a model folder: config.pbtxt and 1/model.onnx.
func writeModel(t testing.TB, dir, config string, onnx []byte) {
	t.Helper()
	servertest.WriteModel(t, dir, servertest.Model{Config: config, ONNX: onnx})
}

var must = servertest.Must

type env struct {
	url  string
	core *core.Server
	api  *httpapi.Server
	h    *handler
}

type setup struct {
	repo          string // repository root (a fresh empty one when "")
	startup       []string
	api           httpapi.Options
	sm            Options
	allowFailures bool
	namespacing   bool // --model-namespacing, as `serve` sets it
	backends      []core.Backend
}

// start runs core, base API and SageMaker handler behind a real listener;
// all of it stops when the test ends.
func start(t testing.TB, s setup) *env {
	t.Helper()
	c := servertest.Start(t, servertest.Options{
		Repo: s.repo, Mode: core.ModeExplicit, Startup: s.startup, AllowFailures: s.allowFailures, Namespacing: s.namespacing,
		Backends: s.backends,
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s.api.Logger = log
	api := httpapi.New(c, s.api)
	s.sm.Logger = log
	h := New(c, api, s.sm).(*handler)
	h.pollEvery = 10 * time.Millisecond
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{url: srv.URL, core: c, api: api, h: h}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// do sends one request; header values are set verbatim (no
// canonicalisation of Content-Type values happens in net/http).
func (e *env) do(t testing.TB, method, path string, header map[string]string, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	must(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// expect checks status and, unless body is "*", the exact body.
func (r reply) expect(t testing.TB, what string, status int, body string) {
	t.Helper()
	if r.status != status || (body != "*" && r.body != body) {
		t.Errorf("%s: got %d %q, want %d %q", what, r.status, r.body, status, body)
	}
}

// expectError checks status, a JSON error body containing msg, and its
// Content-Type.
func (r reply) expectError(t testing.TB, what string, status int, msg string) {
	t.Helper()
	if r.status != status || !strings.HasPrefix(r.body, `{"error":`) || !strings.Contains(r.body, msg) || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: got %d %q (%s), want %d error containing %q", what, r.status, r.body, r.header.Get("Content-Type"), status, msg)
	}
}
