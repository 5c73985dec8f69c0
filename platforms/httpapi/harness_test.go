package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// testModel is one model folder of a test repository.
type testModel struct {
	config string
	onnx   []byte // written to 1/model.onnx when non-nil
	files  map[string]string
}

// standardModels are the models most tests use: Triton's `simple`, and
// `id1`, an FP32 identity with dims [-1] that the conformance cases use.
func standardModels(t testing.TB) map[string]testModel {
	return map[string]testModel{
		"simple": {
			config: `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
			onnx: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)),
		},
		"id1": {
			config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
			onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1)),
		},
		"id_fp16": {
			config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
			onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float16, -1, -1)),
		},
		"id_bytes": {
			config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
			onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.String, -1, 1)),
		},
		"decoupled": {
			// ONNX Runtime refuses decoupled models; the test backend does not.
			config: `max_batch_size: 8
backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_transaction_policy { decoupled: true }
`,
			onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1)),
		},
		"labelled": {
			config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
			onnx:  onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4)),
			files: map[string]string{"labels.txt": "cat\ndog\n\nbird\n"},
		},
	}
}

// writeRepo writes models to a fresh temporary repository.
func writeRepo(t testing.TB, models map[string]testModel) string {
	t.Helper()
	root := t.TempDir()
	writeRepoInto(t, root, models)
	return root
}

// writeRepoInto writes models into an existing repository root.
func writeRepoInto(t testing.TB, root string, models map[string]testModel) {
	t.Helper()
	for name, m := range models {
		dir := filepath.Join(root, name)
		must(t, os.MkdirAll(dir, 0o755))
		if m.config != "" {
			must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(m.config), 0o644))
		}
		if m.onnx != nil {
			must(t, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "1", "model.onnx"), m.onnx, 0o644))
		}
		for rel, content := range m.files {
			p := filepath.Join(dir, rel)
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type serverOpts struct {
	mode            core.ControlMode
	startup         []string
	api             Options
	allowFailures   bool
	backends        []core.Backend // beside servertest's (the Python backend)
	gpus            []int32        // CUDA devices for KIND_GPU groups
	noFileOverrides bool           // --allow-model-file-override=false
}

// startServer runs the core and the API on a real loopback listener and
// returns the base URL; everything stops when the test ends.
func startServer(t testing.TB, root string, so serverOpts) (string, *core.Server) {
	t.Helper()
	api, srv := newAPI(t, root, so)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), srv
}

// newAPI starts the core on root and returns the API handler without a
// listener; the core stops when the test ends (after startServer's HTTP
// server, since cleanups run last-in first-out).
func newAPI(t testing.TB, root string, so serverOpts) (*Server, *core.Server) {
	t.Helper()
	srv := servertest.Start(t, servertest.Options{Repo: root, Mode: so.mode, Startup: so.startup, AllowFailures: so.allowFailures, Backends: so.backends, GPUs: so.gpus, NoFileOverrides: so.noFileOverrides})
	so.api.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(srv, so.api), srv
}

// do sends one request and returns status, headers and body.
func do(t testing.TB, method, url string, header http.Header, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	must(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header, b
}

func post(t testing.TB, url, body string) (int, http.Header, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url, nil, strings.NewReader(body))
}
