package vertex

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// Vertex's default route shapes.
const (
	healthRoute  = "/v1/endpoints/123/deployedModels/456"
	predictRoute = "/v1/endpoints/123/deployedModels/456:predict"
)

// testModel is one model folder: config.pbtxt plus model.onnx in versions
// (defaults to "1").
type testModel = servertest.Model

var (
	simpleModel = testModel{
		Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
		ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)),
	}
	// id1 is FP32 identity with a variable dimension.
	id1Model = testModel{
		Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
		ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1)),
	}
	// nb does not batch: one instance is the whole [2,2] tensor.
	nbModel = testModel{
		Config: `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
		ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, 2, 2)),
	}
	// twoVersions serves versions 1 and 2 at once.
	twoVersionsModel = testModel{
		Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { all: {} }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
		ONNX:     onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1)),
		Versions: []string{"1", "2"},
	}
)

var must = servertest.Must

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startCore loads models into a real core with the ONNX Runtime backend and
// builds the base API over it; both stop when the test ends.
func startCore(t testing.TB, models map[string]testModel, apiOpts httpapi.Options) (*core.Server, *httpapi.Server) {
	t.Helper()
	c := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	if apiOpts.Logger == nil {
		apiOpts.Logger = quiet
	}
	return c, httpapi.New(c, apiOpts)
}

// listen serves a Vertex handler with the default routes on a real
// listener; resolve runs Resolve first, which must succeed.
func listen(t testing.TB, c *core.Server, api *httpapi.Server, defaultModel string, resolve bool) (*Handler, string) {
	t.Helper()
	h := New(c, api, Options{HealthRoute: healthRoute, PredictRoute: predictRoute, DefaultModel: defaultModel, Logger: quiet})
	if resolve {
		must(t, h.Resolve())
	}
	_, base := listenHandler(t, h)
	return h, base
}

// listenHandler serves h on a real loopback listener until the test ends.
func listenHandler(t testing.TB, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, ts.URL
}

// do sends one request; header values are set verbatim (no canonicalising)
// so that lower-case names reach the server as clients send them.
func do(t testing.TB, method, url string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	for k, v := range header {
		req.Header[k] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header, b
}
