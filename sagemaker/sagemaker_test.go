package sagemaker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/platforms/httpapi"
)

// smeRepo is a single-model artifact: "simple" plus a broken model used
// by the failed-startup cases.
func smeRepo(t testing.TB) string {
	root := t.TempDir()
	writeModel(t, filepath.Join(root, "simple"), simpleConfig, simpleONNX)
	writeModel(t, filepath.Join(root, "id1"), idConfig, idONNX)
	writeModel(t, filepath.Join(root, "broken"), idConfig, []byte("not an onnx file"))
	return root
}

func ints(n, add int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i + add)
	}
	return "[" + strings.Join(s, ",") + "]"
}

var simpleJSON = `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":` + ints(16, 0) +
	`},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":` + ints(16, 1) + `}]}`

// simpleBinary is simpleJSON with INPUT0 as binary data and OUTPUT0
// requested binary; it returns the body and its JSON header length.
func simpleBinary() (string, int) {
	header := `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},` +
		`{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":` + ints(16, 1) + `}],` +
		`"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}]}`
	raw := make([]byte, 64)
	for i := range 16 {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(i))
	}
	return header + string(raw), len(header)
}

const ctJSON = "application/json"

func TestPing(t *testing.T) {
	root := smeRepo(t)
	restricted := map[string]httpapi.Restriction{
		"inference":        {Key: "X-Auth", Value: "secret"},
		"model-repository": {Key: "X-Auth", Value: "secret"},
	}
	ready := start(t, setup{repo: root, startup: []string{"simple"}, api: httpapi.Options{Restricted: restricted}})
	failed := start(t, setup{repo: root, startup: []string{"simple", "broken"}, allowFailures: true})
	live := start(t, setup{repo: root, startup: []string{"simple", "broken"}, allowFailures: true, sm: Options{PingMode: "live"}})
	healthRestricted := start(t, setup{repo: root, api: httpapi.Options{Restricted: map[string]httpapi.Restriction{"health": {Key: "X-Auth", Value: "secret"}}}})

	cases := []struct {
		name   string
		e      *env
		method string
		path   string
		header map[string]string
		status int
		body   string
	}{
		// Healthy, no header needed for other categories
		// (triton-inference-server/server qa/L0_sagemaker/test.sh)
		{"ready", ready, http.MethodGet, "/ping", nil, 200, ""},
		// A startup model failed → 400, not 503
		{"startup failure", failed, http.MethodGet, "/ping", nil, 400, ""},
		{"POST", ready, http.MethodPost, "/ping", nil, 405, `{"error":"Method Not Allowed"}`},
		// SAGEMAKER_TRITON_PING_MODE=live
		{"live mode", live, http.MethodGet, "/ping", nil, 200, ""},
		{"trailing slash", ready, http.MethodGet, "/ping/", nil, 400, ""},
		// The health category of --http-restricted-api guards /ping
		{"health restricted", healthRestricted, http.MethodGet, "/ping", nil, 403, `{"error":"This API is restricted, expecting header 'X-Auth'"}`},
		{"health restricted ok", healthRestricted, http.MethodGet, "/ping", map[string]string{"X-Auth": "secret"}, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.e.do(t, c.method, c.path, c.header, "")
			r.expect(t, c.name, c.status, c.body)
			if c.body == "" && r.header.Get("Content-Type") != "text/plain" {
				t.Errorf("empty reply Content-Type %q, want text/plain", r.header.Get("Content-Type"))
			}
		})
	}

	// During a drain the check itself fails with 503, in both modes (core's
	// "Server exiting", triton-inference-server/core src/server.cc).
	ready.api.SetExiting()
	live.api.SetExiting()
	ready.do(t, http.MethodGet, "/ping", nil, "").expect(t, "exiting ready", 503, `{"error":"Server exiting"}`)
	live.do(t, http.MethodGet, "/ping", nil, "").expect(t, "exiting live", 503, `{"error":"Server exiting"}`)
}

func TestInvocations(t *testing.T) {
	root := smeRepo(t)
	e := start(t, setup{repo: root, startup: []string{"simple", "id1"}, sm: Options{DefaultModel: "simple"}})
	bin, hlen := simpleBinary()
	vendor := func(v string) map[string]string { return map[string]string{"Content-Type": binaryMIME + v} }

	// JSON in and out, no id (triton-inference-server/server
	// qa/L0_sagemaker/sagemaker_test.py).
	r := e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": ctJSON}, simpleJSON)
	want := `{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":` +
		sums(1, 2) + `},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":` + constant(16, -1) + `}]}`
	r.expect(t, "json", 200, want)
	if ct := r.header.Get("Content-Type"); ct != ctJSON {
		t.Errorf("json reply Content-Type %q", ct)
	}
	// Absent or foreign Content-Type: the body is JSON.
	e.do(t, http.MethodPost, "/invocations", nil, simpleJSON).expect(t, "no content type", 200, want)
	e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": "application/octet-stream"}, simpleJSON).expect(t, "other content type", 200, want)

	// The vendor binary content type, both ways.
	r = e.do(t, http.MethodPost, "/invocations", vendor(strconv.Itoa(hlen)), bin)
	if r.status != 200 {
		t.Fatalf("binary: %d %s", r.status, r.body)
	}
	ct := r.header.Get("Content-Type")
	n, err := strconv.Atoi(strings.TrimPrefix(ct, binaryMIME))
	if !strings.HasPrefix(ct, binaryMIME) || err != nil || n > len(r.body) {
		t.Fatalf("binary reply Content-Type %q", ct)
	}
	if r.header.Get("Inference-Header-Content-Length") != "" {
		t.Error("binary reply carries Inference-Header-Content-Length")
	}
	var doc struct {
		Outputs []struct {
			Name       string
			Parameters map[string]int
		}
	}
	must(t, json.Unmarshal([]byte(r.body[:n]), &doc))
	if len(doc.Outputs) != 2 || doc.Outputs[0].Parameters["binary_data_size"] != 64 || len(r.body)-n != 64 {
		t.Fatalf("binary reply %q", r.body)
	}
	for i := range 16 {
		if got := int32(binary.LittleEndian.Uint32([]byte(r.body[n+4*i:]))); got != int32(2*i+1) {
			t.Fatalf("OUTPUT0[%d] = %d, want %d", i, got, 2*i+1)
		}
	}

	// The base binary header is ignored on /invocations.
	e.do(t, http.MethodPost, "/invocations", map[string]string{"Inference-Header-Content-Length": "5"}, simpleJSON).
		expect(t, "Inference-Header-Content-Length ignored", 200, want)
	// The listener ignores compression headers.
	r = e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Encoding": "br", "Accept-Encoding": "gzip"}, simpleJSON)
	r.expect(t, "compression ignored", 200, want)

	// Malformed vendor content types are 400.
	bad := []struct{ name, ct string }{
		{"prefix not first", "additional-string/" + binaryMIME + strconv.Itoa(hlen)},
		{"non-numeric", binaryMIME + "abc"},
		{"empty", binaryMIME},
		{"negative", binaryMIME + "-1"},
		{"larger than body", binaryMIME + strconv.Itoa(len(bin)+1)},
		{"beyond int32", binaryMIME + "99999999999"},
		{"beyond int32 negative", binaryMIME + "-99999999999"},
	}
	for _, c := range bad {
		e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": c.ct}, bin).expectError(t, c.name, 400, "")
	}
	e.do(t, http.MethodGet, "/ping", nil, "").expect(t, "ping after bad requests", 200, "")
	// stoi rules: leading space and trailing garbage are fine.
	e.do(t, http.MethodPost, "/invocations", vendor(" "+strconv.Itoa(hlen)+";charset=x"), bin).expect(t, "stoi", 200, "*")

	// Raw binary mode (H = 0) needs a one-input model; simple has two.
	e.do(t, http.MethodPost, "/invocations", vendor("0"), "0123").expectError(t, "raw on two inputs", 400, "")

	e.do(t, http.MethodGet, "/invocations", nil, "").expect(t, "GET", 405, `{"error":"Method Not Allowed"}`)
	e.do(t, http.MethodGet, "/invocations", vendor("x"), "").expect(t, "GET bad type", 405, `{"error":"Method Not Allowed"}`)

	// Malformed JSON is INTERNAL → 500 on /invocations.
	e.do(t, http.MethodPost, "/invocations", nil, "{").expectError(t, "bad json", 500, "failed to parse the request JSON buffer")
}

// sums is [a, a+b, a+2b, ...] (16 values).
func sums(a, b int) string {
	s := make([]string, 16)
	for i := range s {
		s[i] = strconv.Itoa(a + b*i)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func constant(n, v int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(strconv.Itoa(v)+",", n), ",") + "]"
}

func TestInvocationsDefaultModel(t *testing.T) {
	root := smeRepo(t)
	// No default model named (qa/L0_sagemaker/test.sh), without model
	// namespacing: NOT_FOUND's 404 (namespacing_test.go has the 400).
	e := start(t, setup{repo: root, startup: []string{"simple"}, sm: OptionsFromEnv(func(string) string { return "" })})
	e.do(t, http.MethodPost, "/invocations", nil, simpleJSON).
		expectError(t, "unspecified default", 404, "Request for unknown model: 'unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME' is not found")

	// A known model that is not loaded has no available versions (404).
	e2 := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "id1"}})
	e2.do(t, http.MethodPost, "/invocations", nil, simpleJSON).expectError(t, "not loaded", 404, "Request for unknown model")

	// Decoupled models are rejected by infer (501).
	dec := t.TempDir()
	writeModel(t, filepath.Join(dec, "dec"), decoupledConfig, idONNX)
	e3 := start(t, setup{repo: dec, startup: []string{"dec"}, sm: Options{DefaultModel: "dec"}})
	e3.do(t, http.MethodPost, "/invocations", nil, `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}`).
		expectError(t, "decoupled", 501, "decoupled")
}

func TestInvocationsLimitsAndRestrictions(t *testing.T) {
	root := smeRepo(t)
	small := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}`
	large := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,40],"data":` + strings.Repeat("1,", 39) + `1]}]}`
	// --http-max-input-size.
	e := start(t, setup{repo: root, startup: []string{"id1"}, api: httpapi.Options{MaxInputSize: 128}, sm: Options{DefaultModel: "id1"}})
	e.do(t, http.MethodPost, "/invocations", nil, small).expect(t, "small", 200, "*")
	e.do(t, http.MethodPost, "/invocations", nil, large).expectError(t, "large", 400, "")

	// --http-restricted-api=inference:X-Auth=secret.
	auth := map[string]string{"X-Auth": "secret"}
	r := start(t, setup{repo: root, startup: []string{"id1"}, sm: Options{DefaultModel: "id1"},
		api: httpapi.Options{Restricted: map[string]httpapi.Restriction{"inference": {Key: "X-Auth", Value: "secret"}}}})
	forbidden := `{"error":"This API is restricted, expecting header 'X-Auth'"}`
	r.do(t, http.MethodPost, "/invocations", nil, small).expect(t, "no header", 403, forbidden)
	r.do(t, http.MethodPost, "/invocations", map[string]string{"X-Auth": "wrong"}, small).expect(t, "wrong header", 403, forbidden)
	r.do(t, http.MethodPost, "/invocations", auth, small).expect(t, "header", 200, "*")
	// The restriction wins over a malformed content type and over 405.
	r.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": binaryMIME + "x"}, small).expect(t, "bad type", 403, forbidden)
	r.do(t, http.MethodGet, "/invocations", nil, "").expect(t, "GET", 403, forbidden)
}

// TestRouting is Triton's dispatch (triton-inference-server/server
// src/sagemaker_server.cc): unknown paths 400, GET /models in single-model
// mode {"models":[]}, PUT /models 400.
func TestRouting(t *testing.T) {
	e := start(t, setup{repo: smeRepo(t), startup: []string{"simple"}, sm: Options{DefaultModel: "simple"}})
	cases := []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/", 400, ""},
		{http.MethodGet, "/v2/health/ready", 400, ""},
		{http.MethodPost, "/invocations/", 400, ""},
		{http.MethodGet, "/ping/", 400, ""},
		{http.MethodGet, "/models/a/b", 400, ""},
		{http.MethodGet, "/models/a/invoke/", 400, ""},
		{http.MethodGet, "/models/a/", 400, ""},
		{http.MethodGet, "/modelsfoo", 400, ""},
		{http.MethodPut, "/models", 400, ""},
		{http.MethodPatch, "/models/a", 400, ""},
		{http.MethodHead, "/models", 400, ""},
		// Served beyond Triton (batch_test.go); other spellings stay 400,
		// as does /metrics unless SAGEMAKER_TRITON_METRICS_PATH names it.
		{http.MethodGet, "/execution-parameters/", 400, ""},
		{http.MethodGet, "/metrics", 400, ""},
		{http.MethodGet, "/models", 200, `{"models":[]}`},
		{http.MethodGet, "/models/", 200, `{"models":[]}`},
		{http.MethodGet, "/models/a", 404, ""},
		{http.MethodGet, "/models/a/invoke", 404, ""},
		{http.MethodPost, "/models/a/invoke", 404, ""},
		{http.MethodDelete, "/models/", 404, ""},
		{http.MethodDelete, "/models/a", 404, ""},
	}
	for _, c := range cases {
		r := e.do(t, c.method, c.path+"?x=1", nil, "")
		r.expect(t, fmt.Sprint(c.method, " ", c.path), c.status, c.body)
		if c.method != http.MethodHead && c.body == "" && r.header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s %s: Content-Type %q, want text/plain", c.method, c.path, r.header.Get("Content-Type"))
		}
	}
}

func TestParseModelsPath(t *testing.T) {
	cases := []struct {
		path   string
		id     string
		invoke bool
		ok     bool
	}{
		{"/models", "", false, true},
		{"/models/", "", false, true},
		{"/models/x", "x", false, true},
		{"/models/x/invoke", "x", true, true},
		{"/models/invoke", "invoke", false, true},
		{"/models//invoke", "", true, true},
		{"/models/x/", "", false, false},
		{"/models/x/invoke/", "", false, false},
		{"/models/x/y", "", false, false},
		{"/modelsx", "", false, false},
	}
	for _, c := range cases {
		id, invoke, ok := parseModelsPath(c.path)
		if ok != c.ok || (ok && (id != c.id || invoke != c.invoke)) {
			t.Errorf("%s: got %q %v %v", c.path, id, invoke, ok)
		}
	}
}
