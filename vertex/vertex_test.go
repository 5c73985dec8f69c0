package vertex

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// simpleBody is a v2 request for "simple": INPUT0 = 0..15, INPUT1 = 1s.
func simpleBody(extra string) string {
	in0, in1 := make([]string, 16), make([]string, 16)
	for i := range in0 {
		in0[i], in1[i] = strconv.Itoa(i), "1"
	}
	return `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[` + strings.Join(in0, ",") +
		`]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[` + strings.Join(in1, ",") + `]}]` + extra + `}`
}

// simpleBinaryBody sends INPUT0 as binary after an n-byte JSON header.
func simpleBinaryBody() (string, int) {
	in1 := make([]string, 16)
	for i := range in1 {
		in1[i] = "1"
	}
	header := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},` +
		`{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[` + strings.Join(in1, ",") + `]}]}`
	var buf bytes.Buffer
	buf.WriteString(header)
	for i := range 16 {
		_ = binary.Write(&buf, binary.LittleEndian, int32(i))
	}
	return buf.String(), len(header)
}

const id1Body = `{"inputs":[{"name":"INPUT0","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}`

// wantOutput0 is OUTPUT0 of simple for simpleBody: i+1.
var wantOutput0 = func() string {
	s := make([]string, 16)
	for i := range s {
		s[i] = strconv.Itoa(i + 1)
	}
	return `"data":[` + strings.Join(s, ",") + `]`
}()

type routeCase struct {
	name     string
	method   string
	path     string
	header   map[string]string
	body     string
	status   int
	ctype    string   // checked when set
	exact    *string  // whole body, when set
	contains []string // substrings of the body
	absent   []string // substrings the body must not have
	check    func(t *testing.T, h http.Header, body []byte)
}

func str(s string) *string { return &s }

var empty = str("")

func runRoutes(t *testing.T, base string, cases []routeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			path := c.path
			if path == "" {
				path = predictRoute
			}
			status, h, body := do(t, method, base+path, c.header, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d (body %q)", status, c.status, body)
			}
			if c.ctype != "" && h.Get("Content-Type") != c.ctype {
				t.Errorf("Content-Type %q, want %q", h.Get("Content-Type"), c.ctype)
			}
			if c.exact != nil && string(body) != *c.exact {
				t.Errorf("body %q, want %q", body, *c.exact)
			}
			for _, s := range c.contains {
				if !bytes.Contains(body, []byte(s)) {
					t.Errorf("body %q lacks %q", body, s)
				}
			}
			for _, s := range c.absent {
				if bytes.Contains(body, []byte(s)) {
					t.Errorf("body %q has %q", body, s)
				}
			}
			if c.check != nil {
				c.check(t, h, body)
			}
		})
	}
}

func redirect(target string) map[string]string { return map[string]string{RedirectHeader: target} }

const notAllowed = `{"error":"Method Not Allowed"}`

// TestRoutes covers the Vertex routes Triton tests (triton-inference-server/
// server qa/L0_vertex_ai/test.sh, vertex_ai_test.py) on
// a handler whose default model is "simple".
func TestRoutes(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"simple": simpleModel, "id1": id1Model, "nb": nbModel}, httpapi.Options{})
	_, base := listen(t, c, api, "simple", true)
	binBody, binLen := simpleBinaryBody()
	bin := func(v string) map[string]string {
		return map[string]string{"Content-Type": "application/vnd.vertex-ai-triton.binary+json;json-header-size=" + v}
	}
	cases := []routeCase{
		// Health.
		{name: "health GET ready", method: "GET", path: healthRoute, status: 200, exact: empty},
		{name: "health query ignored", method: "GET", path: healthRoute + "?x=1", status: 200, exact: empty},
		{name: "health POST", method: "POST", path: healthRoute, status: 405, ctype: "application/json", exact: str(notAllowed)},

		// Default-model prediction, JSON and binary.
		{name: "predict v2 JSON", body: simpleBody(""), status: 200, ctype: "application/json",
			contains: []string{`{"model_name":"simple","model_version":"1","outputs":[`, wantOutput0}, absent: []string{`"id"`}},
		{name: "predict keeps id", body: strings.Replace(simpleBody(""), `{`, `{"id":"7",`, 1), status: 200, contains: []string{`{"id":"7","model_name":"simple"`}},
		{name: "predict binary request", body: binBody, header: bin(strconv.Itoa(binLen)), status: 200, contains: []string{wantOutput0}},
		{name: "predict binary response", body: simpleBody(`,"parameters":{"binary_data_output":true}`), status: 200, ctype: "application/octet-stream",
			check: func(t *testing.T, h http.Header, body []byte) {
				n, err := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
				if err != nil || n <= 0 || n+128 != len(body) {
					t.Fatalf("Inference-Header-Content-Length %q for %d bytes", h.Get("Inference-Header-Content-Length"), len(body))
				}
				if !json.Valid(body[:n]) || !bytes.Contains(body[:n], []byte(`"binary_data_size":64`)) {
					t.Errorf("JSON part %q", body[:n])
				}
				if got := int32(binary.LittleEndian.Uint32(body[n+4:])); got != 2 {
					t.Errorf("OUTPUT0[1] = %d, want 2", got)
				}
			}},
		{name: "predict ignores Inference-Header-Content-Length", body: simpleBody(""), header: map[string]string{"Inference-Header-Content-Length": "5"}, status: 200, contains: []string{wantOutput0}},
		{name: "predict ignores encodings", body: simpleBody(""), header: map[string]string{"Content-Encoding": "gzip", "Accept-Encoding": "gzip"}, status: 200, contains: []string{wantOutput0},
			check: func(t *testing.T, h http.Header, _ []byte) {
				if h.Get("Content-Encoding") != "" {
					t.Errorf("response compressed: %q", h.Get("Content-Encoding"))
				}
			}},
		{name: "predict GET", method: "GET", status: 405, ctype: "application/json", exact: str(notAllowed)},
		{name: "predict bad datatype", body: strings.Replace(simpleBody(""), `"INT32"`, `"FP32"`, 1), status: 400, ctype: "application/json", contains: []string{`{"error":"`}},
		{name: "predict bad shape", body: strings.Replace(simpleBody(""), "[1,16]", "[1,15]", 1), status: 500, ctype: "application/json", contains: []string{`{"error":"`}},
		{name: "predict malformed JSON", body: `{"inputs":[`, status: 500, ctype: "application/json", contains: []string{`{"error":"failed to parse the request JSON buffer`}},

		// Malformed binary content types; health stays 200 after.
		{name: "content type prefix not first", body: binBody, header: map[string]string{"Content-Type": "additional-string/application/vnd.vertex-ai-triton.binary+json;json-header-size=" + strconv.Itoa(binLen)},
			status: 400, ctype: "application/json", contains: []string{"expect MIME type for binary data starts with"}},
		{name: "content type non-numeric", body: binBody, header: bin("abc"), status: 400, contains: []string{"Unable to parse inference header size, got: abc"}},
		{name: "content type negative", body: binBody, header: bin("-1"), status: 400, contains: []string{"inference header size should be in range"}},
		{name: "content type beyond body", body: binBody, header: bin(strconv.Itoa(len(binBody) + 1)), status: 400, contains: []string{"inference header size should be in range"}},
		{name: "content type beyond int32", body: binBody, header: bin("99999999999"), status: 400,
			exact: str(`{"error":"Unable to parse inference header size, value is out of range, got: 99999999999"}`)},
		{name: "content type with trailing garbage", body: binBody, header: bin(strconv.Itoa(binLen) + "xyz"), status: 200, contains: []string{wantOutput0}},
		{name: "health still ready", method: "GET", path: healthRoute, status: 200, exact: empty},

		// Redirects.
		{name: "redirect infer", body: id1Body, header: redirect("v2/models/id1/infer"), status: 200, contains: []string{`"model_name":"id1"`, `"data":[1.0,2.0,3.0]`}},
		{name: "redirect header lower case", body: id1Body, header: map[string]string{"x-vertex-ai-triton-redirect": "v2/models/id1/infer"}, status: 200, contains: []string{`"model_name":"id1"`}},
		{name: "redirect versioned infer", body: id1Body, header: redirect("v2/models/id1/versions/1/infer"), status: 200, contains: []string{`"model_version":"1"`}},
		{name: "redirect infer binary", body: binBody, header: map[string]string{RedirectHeader: "v2/models/simple/infer", "Content-Type": bin(strconv.Itoa(binLen))["Content-Type"]}, status: 200, contains: []string{wantOutput0}},
		{name: "redirect infer unknown model", body: id1Body, header: redirect("v2/models/nope/infer"), status: 404, contains: []string{"Request for unknown model: 'nope' is not found"}},
		{name: "redirect metrics", header: redirect("metrics"), status: 200, contains: []string{"nv_inference_request_success", `model="simple"`},
			check: func(t *testing.T, h http.Header, _ []byte) {
				if !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
					t.Errorf("Content-Type %q", h.Get("Content-Type"))
				}
			}},
		{name: "redirect all stats", header: redirect("v2/models/stats"), status: 200, contains: []string{`"name":"simple"`, `"name":"id1"`}},
		{name: "redirect model stats", header: redirect("v2/models/id1/stats"), status: 200, contains: []string{`"name":"id1"`}, absent: []string{`"name":"simple"`}},
		{name: "redirect live", header: redirect("v2/health/live"), status: 200, exact: empty},
		{name: "redirect ready", header: redirect("v2/health/ready"), status: 200, exact: empty},
		{name: "redirect model ready", header: redirect("v2/models/simple/ready"), status: 200, exact: empty},
		{name: "redirect unloaded model ready", header: redirect("v2/models/nope/ready"), status: 400},
		{name: "redirect server metadata", header: redirect("v2"), status: 200, contains: []string{`"extensions":[`}},
		{name: "redirect model metadata", header: redirect("v2/models/simple"), status: 200, contains: []string{`"platform":"onnxruntime_onnx"`}},
		{name: "redirect versioned metadata", header: redirect("v2/models/simple/versions/1"), status: 200, contains: []string{`"versions":["1"]`}},
		{name: "redirect config", header: redirect("v2/models/simple/config"), status: 200, contains: []string{`"version_policy"`}},
		{name: "redirect system shm status", header: redirect("v2/systemsharedmemory/status"), status: 200, exact: str("[]")},
		{name: "redirect cuda shm status", header: redirect("v2/cudasharedmemory/status"), status: 200, exact: str("[]")},
		{name: "redirect repository index", header: redirect("v2/repository/index"), status: 200,
			check: func(t *testing.T, _ http.Header, body []byte) {
				var idx []map[string]string
				must(t, json.Unmarshal(body, &idx))
				if len(idx) != 3 {
					t.Fatalf("index %s", body)
				}
				for _, e := range idx {
					if e["state"] != "READY" {
						t.Errorf("entry %v has no READY state", e)
					}
				}
			}},
		{name: "redirect GET", method: "GET", header: redirect("v2/health/live"), status: 405, exact: empty},
		{name: "redirect PUT", method: "PUT", header: redirect("v2/models/simple/infer"), body: simpleBody(""), status: 405, exact: empty},
		{name: "redirect leading slash", header: redirect("/v2/health/live"), status: 400, exact: empty},
		{name: "redirect generate", header: redirect("v2/models/simple/generate"), status: 400, exact: empty},
		{name: "redirect logging", header: redirect("v2/logging"), status: 400, exact: empty},
		{name: "redirect trace", header: redirect("v2/models/simple/trace/setting"), status: 400, exact: empty},
		{name: "redirect empty value", header: redirect(""), status: 400, exact: empty},

		// Unmatched paths: 400, empty body.
		{name: "unknown path", path: "/v2/models/simple/infer", body: simpleBody(""), status: 400, ctype: "text/plain", exact: empty},
		{name: "predict route trailing slash", path: predictRoute + "/", body: simpleBody(""), status: 400, exact: empty},
		{name: "health route prefix", method: "GET", path: "/v1/endpoints/123", status: 400, exact: empty},
	}
	// Refused targets: shared-memory register/unregister, load/unload.
	for _, target := range []string{
		"v2/systemsharedmemory/register", "v2/systemsharedmemory/unregister", "v2/systemsharedmemory/region/r/register",
		"v2/cudasharedmemory/register", "v2/cudasharedmemory/region/r/unregister",
		"v2/repository/models/simple/load", "v2/repository/models/simple/unload", "v2/repository/other/models/simple/load",
	} {
		cases = append(cases, routeCase{name: "redirect refused " + target, header: redirect(target), status: 403, exact: empty})
	}
	runRoutes(t, base, cases)
}

// TestRestricted: redirects (refused ones too, with a valid header) are
// restricted by their target's category; the default-model prediction by
// "inference" only.
func TestRestricted(t *testing.T) {
	restricted := map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "metadata,model-config,model-repository,statistics,shared-memory:X-Auth=secret"))
	c, api := startCore(t, map[string]testModel{"simple": simpleModel}, httpapi.Options{Restricted: restricted})
	_, base := listen(t, c, api, "", true)

	restrictedMsg := `{"error":"This API is restricted, expecting header 'X-Auth'"}`
	var cases []routeCase
	for _, target := range []string{"v2", "v2/models/simple", "v2/models/simple/config", "v2/repository/index", "v2/models/stats", "v2/models/simple/stats", "v2/systemsharedmemory/status", "v2/cudasharedmemory/status"} {
		cases = append(cases,
			routeCase{name: target + " without header", header: redirect(target), status: 403, ctype: "application/json", exact: str(restrictedMsg)},
			routeCase{name: target + " wrong header", header: map[string]string{RedirectHeader: target, "X-Auth": "nope"}, status: 403},
			routeCase{name: target + " with header", header: map[string]string{RedirectHeader: target, "X-Auth": "secret"}, status: 200},
		)
	}
	for _, target := range []string{"v2/systemsharedmemory/register", "v2/repository/models/simple/load", "v2/repository/models/simple/unload"} {
		cases = append(cases, routeCase{name: target + " refused with header", header: map[string]string{RedirectHeader: target, "X-Auth": "secret"}, status: 403, exact: empty})
	}
	cases = append(cases,
		routeCase{name: "predict stays open", body: simpleBody(""), status: 200, contains: []string{wantOutput0}},
		routeCase{name: "health stays open", method: "GET", path: healthRoute, status: 200},
		routeCase{name: "metrics not restricted", header: redirect("metrics"), status: 200},
	)
	runRoutes(t, base, cases)

	// inference and health restricted: the predict route, an "instances"
	// request and early body errors all answer 403 first.
	restricted = map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "inference,health:X-Auth=secret"))
	c, api = startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Restricted: restricted})
	_, base = listen(t, c, api, "", true)
	auth := map[string]string{"X-Auth": "secret"}
	badCT := map[string]string{"Content-Type": BinaryContentType + "abc"}
	runRoutes(t, base, []routeCase{
		{name: "predict without header", body: id1Body, status: 403, exact: str(restrictedMsg)},
		{name: "predict with header", body: id1Body, header: auth, status: 200},
		{name: "instances without header", body: `{"instances":[[1]]}`, status: 403, exact: str(restrictedMsg)},
		{name: "bad instances without header", body: `{"instances":[]}`, status: 403, exact: str(restrictedMsg)},
		{name: "bad content type without header", body: id1Body, header: badCT, status: 403, exact: str(restrictedMsg)},
		{name: "bad content type with header", body: id1Body, header: map[string]string{"Content-Type": badCT["Content-Type"], "X-Auth": "secret"}, status: 400},
		{name: "redirect infer without header", body: id1Body, header: redirect("v2/models/id1/infer"), status: 403},
		{name: "health without header", method: "GET", path: healthRoute, status: 403, exact: str(restrictedMsg)},
		{name: "health with header", method: "GET", path: healthRoute, header: auth, status: 200},
	})
}

// TestMaxInputSize: --http-max-input-size rejects oversized predict bodies.
func TestMaxInputSize(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{MaxInputSize: 128})
	_, base := listen(t, c, api, "", true)
	big := make([]string, 64)
	for i := range big {
		big[i] = "1"
	}
	bigBody := `{"inputs":[{"name":"INPUT0","shape":[1,64],"datatype":"FP32","data":[` + strings.Join(big, ",") + `]}]}`
	runRoutes(t, base, []routeCase{
		{name: "small", body: id1Body, status: 200},
		{name: "oversized", body: bigBody, status: 400, contains: []string{"--http-max-input-size"}},
		{name: "oversized instances", body: `{"instances":[[` + strings.Join(big, ",") + `]]}`, status: 400, contains: []string{"--http-max-input-size"}},
		// The instances are not re-encoded: the bound applies to the body
		// sent and to each tensor, as for a v2 body.
		{name: "instances tensor oversized", body: `{"instances":[[` + strings.Join(big[:33], ",") + `]]}`, status: 400,
			exact: str(`{"error":"JSON input 'INPUT0' has a byte_size (132 bytes) that exceeds the maximum allowed value of 128 bytes. Use --http-max-input-size to increase the limit."}`)},
		{name: "oversized redirect", body: bigBody, header: redirect("v2/models/id1/infer"), status: 400},
	})
}

// TestStartup covers the start-up errors (missing AIP_PREDICT_ROUTE, a
// default model not loaded, several models and no default), the
// multi-version quirk fix, and the not-ready answers before Resolve.
func TestStartup(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"no routes", map[string]string{}, MsgNoPredictRoute},
		{"no predict route", map[string]string{"AIP_HEALTH_ROUTE": healthRoute}, MsgNoPredictRoute},
		{"empty predict route", map[string]string{"AIP_PREDICT_ROUTE": "", "AIP_HEALTH_ROUTE": healthRoute}, MsgNoPredictRoute},
		{"no health route", map[string]string{"AIP_PREDICT_ROUTE": predictRoute}, MsgNoHealthRoute},
		{"both", map[string]string{"AIP_PREDICT_ROUTE": predictRoute, "AIP_HEALTH_ROUTE": healthRoute}, ""},
	} {
		t.Run("env "+c.name, func(t *testing.T) {
			o, err := OptionsFromEnv(env(c.env), "m", false)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			must(t, err)
			if o.PredictRoute != predictRoute || o.HealthRoute != healthRoute || o.DefaultModel != "m" {
				t.Errorf("options %+v", o)
			}
		})
	}

	for _, c := range []struct {
		name         string
		models       map[string]testModel
		defaultModel string
		want         string // resolved model, or the error text
		wantErr      bool
	}{
		{"single model", map[string]testModel{"id1": id1Model}, "", "id1", false},
		{"two models", map[string]testModel{"id1": id1Model, "simple": simpleModel}, "", MsgSingleModel, true},
		{"two models with default", map[string]testModel{"id1": id1Model, "simple": simpleModel}, "simple", "simple", false},
		{"unknown default", map[string]testModel{"id1": id1Model}, "nope", "Expect the default model 'nope' is loaded", true},
		{"one model two versions", map[string]testModel{"two": twoVersionsModel}, "", "two", false},
	} {
		t.Run("resolve "+c.name, func(t *testing.T) {
			core, api := startCore(t, c.models, httpapi.Options{})
			h, base := listen(t, core, api, c.defaultModel, false)
			notReady := []routeCase{
				{name: "health before resolve", method: "GET", path: healthRoute, status: 400, exact: empty},
				{name: "health POST before resolve", method: "POST", path: healthRoute, status: 405, exact: str(notAllowed)},
				{name: "predict before resolve", body: id1Body, status: 503, ctype: "application/json", exact: str(`{"error":"Server not ready"}`)},
				{name: "redirect before resolve", header: redirect("v2/health/live"), status: 503},
			}
			runRoutes(t, base, notReady)
			err := h.Resolve()
			if c.wantErr {
				if err == nil || err.Error() != c.want {
					t.Fatalf("Resolve: %v, want %q", err, c.want)
				}
				runRoutes(t, base, notReady) // a failed resolve stays not ready
				return
			}
			must(t, err)
			if h.DefaultModel() != c.want {
				t.Fatalf("default model %q, want %q", h.DefaultModel(), c.want)
			}
			body := id1Body
			if c.want == "simple" {
				body = simpleBody("")
			}
			runRoutes(t, base, []routeCase{
				{name: "health after resolve", method: "GET", path: healthRoute, status: 200, exact: empty},
				{name: "predict after resolve", body: body, status: 200, contains: []string{`"model_name":"` + c.want + `"`}},
			})
		})
	}
}

// TestHealthStates covers 200 / 400 / 503 and the health-wins rule.
func TestHealthStates(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{})

	// Both routes equal: health is checked first.
	same := New(c, api, Options{HealthRoute: "/same", PredictRoute: "/same", Logger: quiet})
	must(t, same.Resolve())
	ts := newServer(t, same)
	runRoutes(t, ts, []routeCase{
		{name: "equal routes GET", method: "GET", path: "/same", status: 200, exact: empty},
		{name: "equal routes POST is health", method: "POST", path: "/same", body: id1Body, status: 405, exact: str(notAllowed)},
	})

	_, base := listen(t, c, api, "", true)
	api.SetExiting()
	runRoutes(t, base, []routeCase{
		{name: "exiting", method: "GET", path: healthRoute, status: 503, ctype: "application/json", exact: str(`{"error":"Server exiting"}`)},
	})
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	_, base := listenHandler(t, h)
	return base
}

// TestInstances covers the "instances" → "predictions" translation.
func TestInstances(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"simple": simpleModel, "id1": id1Model, "nb": nbModel, "bytes": servertest.IDBytes("bytes")}, httpapi.Options{})
	bases := map[string]string{}
	for _, m := range []string{"simple", "id1", "nb", "bytes"} {
		_, bases[m] = listen(t, c, api, m, true)
	}
	seq := func(f func(i int) int) string {
		s := make([]string, 16)
		for i := range s {
			s[i] = strconv.Itoa(f(i))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	in0, in1 := seq(func(i int) int { return i }), seq(func(int) int { return 1 })
	simpleInstance := `{"INPUT0":` + in0 + `,"INPUT1":` + in1 + `}`
	for _, c := range []struct {
		name, model, body string
		status            int
		want              string // predictions JSON (compared as values) or an error substring
	}{
		{"one input rows", "id1", `{"instances":[[1,2,3],[4,5,6]]}`, 200, `{"predictions":[[1,2,3],[4,5,6]]}`},
		{"one input keyed", "id1", `{"instances":[{"INPUT0":[1.5]},{"INPUT0":[2.5]}]}`, 200, `{"predictions":[[1.5],[2.5]]}`},
		{"one input scalars", "id1", `{"instances":[1,2]}`, 200, `{"predictions":[[1],[2]]}`},
		{"parameters passed, binary output ignored", "id1", `{"instances":[[7]],"parameters":{"binary_data_output":true,"priority":1,"custom":"x"}}`, 200, `{"predictions":[[7]]}`},
		{"multi-input keyed", "simple", `{"instances":[` + simpleInstance + `,` + simpleInstance + `]}`, 200,
			`{"predictions":[{"OUTPUT0":` + seq(func(i int) int { return i + 1 }) + `,"OUTPUT1":` + seq(func(i int) int { return i - 1 }) + `},{"OUTPUT0":` + seq(func(i int) int { return i + 1 }) + `,"OUTPUT1":` + seq(func(i int) int { return i - 1 }) + `}]}`},
		{"non-batching one instance", "nb", `{"instances":[[[1,2],[3,4]]]}`, 200, `{"predictions":[[[1,2],[3,4]]]}`},
		{"non-batching flat instance", "nb", `{"instances":[[1,2,3,4]]}`, 200, `{"predictions":[[[1,2],[3,4]]]}`},
		{"v2 body with instances member", "id1", `{"instances":1,` + id1Body[1:], 200, ""},
		{"BYTES", "bytes", `{"instances":[["a","b,\"c",""]]}`, 200, `{"predictions":[["a","b,\"c",""]]}`},
		{"repeated input keeps its last value", "id1", `{"instances":[{"INPUT0":[1],"INPUT0":[2]}]}`, 200, `{"predictions":[[2]]}`},
		{"binary_data_output of any type ignored", "id1", `{"instances":[[7]],"parameters":{"binary_data_output":"x"}}`, 200, `{"predictions":[[7]]}`},
		{"parameters null", "id1", `{"instances":[[7]],"parameters":null}`, 200, `{"predictions":[[7]]}`},

		{"multi-input rows", "simple", `{"instances":[` + in0 + `]}`, 400, "model 'simple' has 2 inputs (INPUT0, INPUT1): each instance must be an object keyed by input name"},
		{"unknown input", "simple", `{"instances":[{"INPUT0":` + in0 + `,"FOO":1}]}`, 400, "model 'simple' has no input 'FOO'"},
		{"missing input", "simple", `{"instances":[{"INPUT0":` + in0 + `}]}`, 400, "instances lack input 'INPUT1'"},
		{"different keys", "simple", `{"instances":[` + simpleInstance + `,{"INPUT0":` + in0 + `}]}`, 400, "every instance must name the same inputs"},
		{"mixed forms", "id1", `{"instances":[{"INPUT0":[1]},[1]]}`, 400, "instances mix objects"},
		{"empty instances", "id1", `{"instances":[]}`, 400, "'instances' must be a non-empty JSON array"},
		{"instances not array", "id1", `{"instances":{"INPUT0":[1]}}`, 400, "'instances' must be a non-empty JSON array"},
		{"ragged instances", "id1", `{"instances":[[1,2],[1]]}`, 400, "instances must agree"},
		{"parameters not object", "id1", `{"instances":[[1]],"parameters":[1]}`, 400, "'parameters' must be a JSON object"},
		{"non-batching two instances", "nb", `{"instances":[[1,2,3,4],[1,2,3,4]]}`, 400, "does not support batching"},
		{"wrong element count", "simple", `{"instances":[{"INPUT0":[1],"INPUT1":[1]}]}`, 400, "input 'INPUT0', instance 0 has 1 values, want 16"},
		{"ragged nesting", "nb", `{"instances":[[[1,2],[3]]]}`, 400, "instance 0 has 3 values, want 4"},
		{"too many instances", "id1", `{"instances":[[1],[1],[1],[1],[1],[1],[1],[1],[1]]}`, 400, `"error":`},
		{"malformed instances", "id1", `{"instances":[[1]`, 500, "failed to parse the request JSON buffer"},
		{"object in a row", "id1", `{"instances":[{"INPUT0":{"a":1}}]}`, 400, "input 'INPUT0', instance 0 has 2 values, want 1"},
		{"nested too deep", "id1", `{"instances":[` + strings.Repeat("[", 99) + "1" + strings.Repeat("]", 99) + `]}`, 400, "JSON nesting depth exceeds maximum allowed limit (100)"},
		{"element type", "id1", `{"instances":[["a"]]}`, 500, "Unable to parse 'data': attempt to access JSON non-number as double"},
		{"parameter type", "id1", `{"instances":[[7]],"parameters":{"priority":"x"}}`, 500, "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{"reserved parameter", "id1", `{"instances":[[7]],"parameters":{"triton_x":1}}`, 400, "parameter keys starting with 'triton_' are reserved for Triton usage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := do(t, http.MethodPost, bases[c.model]+predictRoute, map[string]string{"Content-Type": "application/json"}, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			if h.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", h.Get("Content-Type"))
			}
			switch {
			case c.want == "":
			case status == 200:
				var got, want any
				must(t, json.Unmarshal(body, &got))
				must(t, json.Unmarshal([]byte(c.want), &want))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("got %s, want %s", body, c.want)
				}
			default:
				var e struct{ Error string }
				if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
					t.Fatalf("error body %q", body)
				}
				if !bytes.Contains(body, []byte(c.want)) {
					t.Errorf("error %q lacks %q", body, c.want)
				}
			}
		})
	}
}

// TestHeaderSize checks the stoi-like parse of json-header-size directly.
func TestHeaderSize(t *testing.T) {
	for _, c := range []struct {
		ct      string
		n, want int
		err     bool
	}{
		{"application/json", 10, -1, false},
		{"", 0, -1, false},
		{BinaryContentType + "4", 10, 4, false},
		{BinaryContentType + " +4;x", 10, 4, false},
		{BinaryContentType + "0", 10, 0, false},
		{BinaryContentType + "10", 10, 10, false},
		{BinaryContentType + "11", 10, 0, true},
		{BinaryContentType + "", 10, 0, true},
		{BinaryContentType + "-0", 10, 0, false},
		{BinaryContentType + "2147483648", 1 << 31, 0, true},
		{"x" + BinaryContentType + "4", 10, 0, true},
		{"application/vnd.vertex-ai-triton.binary+json; json-header-size=4", 10, -1, false},
		// Unknown body length (chunked): the base server checks the bound.
		{BinaryContentType + "11", -1, 11, false},
		{BinaryContentType + "-1", -1, 0, true},
	} {
		got, err := headerSize(c.ct, int64(c.n))
		if (err != nil) != c.err || (err == nil && got != c.want) {
			t.Errorf("headerSize(%q, %d) = %d, %v; want %d, err %v", c.ct, c.n, got, err, c.want, c.err)
		}
	}
}
