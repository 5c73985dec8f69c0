package sagemaker

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/platforms/httpapi"
)

// generateRepo is smeRepo plus a BYTES identity model, "text".
func generateRepo(t *testing.T) string {
	root := smeRepo(t)
	writeModel(t, filepath.Join(root, "text"), `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, textONNX(t))
	return root
}

// textONNX is an identity over STRING [-1, 1] named text_input/text_output,
// the names LLM models use on generate.
func textONNX(t *testing.T) []byte {
	g := onnxbuild.NewGraph("text")
	g.Input("text_input", onnxbuild.String, -1, 1)
	g.Output("text_output", onnxbuild.String, -1, 1)
	g.Node("Identity", []string{"text_input"}, []string{"text_output"})
	b, err := onnxbuild.Model(g, onnxbuild.DefaultOpset)
	must(t, err)
	return b
}

// TestInvocationsGenerate: SAGEMAKER_TRITON_INFERENCE_TYPE=generate answers
// /invocations with the generate object (triton-inference-server/server
// qa/L0_sagemaker/sagemaker_generate_test.py).
func TestInvocationsGenerate(t *testing.T) {
	root := generateRepo(t)
	e := start(t, setup{repo: root, startup: []string{"text", "simple"}, sm: Options{DefaultModel: "text", InferenceType: "generate"}})
	r := e.do(t, http.MethodPost, "/invocations", nil, `{"text_input":"hello","id":"7"}`)
	r.expect(t, "text", 200, `{"id":"7","model_name":"text","model_version":"1","text_output":"hello"}`)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}

	s := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "simple", InferenceType: "generate"}})
	body := `{"INPUT0":` + ints(16, 0) + `,"INPUT1":` + ints(16, 0) + `}`
	// OUTPUT0 = INPUT0 + INPUT1 = 2i, OUTPUT1 = INPUT0 - INPUT1 = 0.
	want := `{"OUTPUT0":` + doubled(16) + `,"OUTPUT1":[` + strings.TrimSuffix(strings.Repeat("0,", 16), ",") + `],"model_name":"simple","model_version":"1"}`
	s.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": "text/plain"}, body).expect(t, "simple", 200, want)

	// Errors before inference: JSON, standard mapping.
	s.do(t, http.MethodPost, "/invocations", nil, `{"INPUT0":`+ints(16, 0)+`}`).expectError(t, "missing input", 400, "missing required input(s) ['INPUT1']")
	s.do(t, http.MethodPost, "/invocations", nil, `{`).expectError(t, "bad JSON", 500, "failed to parse the request JSON buffer")
	s.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Encoding": "gzip"}, body).
		expect(t, "gzip", 400, `{"error":"Unsupported content-encoding, only 'identity' is supported."}`)
	s.do(t, http.MethodGet, "/invocations", nil, "").expect(t, "GET", 405, `{"error":"Method Not Allowed"}`)

	u := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "nope", InferenceType: "generate"}})
	u.do(t, http.MethodPost, "/invocations", nil, body).expectError(t, "unknown", 404, "Request for unknown model: 'nope' is not found")
	v := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "a/b", InferenceType: "generate_stream"}})
	v.do(t, http.MethodPost, "/invocations", nil, body).expectError(t, "slash", 404, "Request for unknown model: 'a/b' is not found")
}

// doubled is the JSON array 0, 2, ..., 2(n-1).
func doubled(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(2 * i)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestInvocationsGenerateStream: generate_stream answers with SSE events
// (triton-inference-server/server
// qa/L0_sagemaker/sagemaker_generate_stream_test.py).
func TestInvocationsGenerateStream(t *testing.T) {
	e := start(t, setup{repo: generateRepo(t), startup: []string{"text"}, sm: Options{DefaultModel: "text", InferenceType: "generate_stream"}})
	r := e.do(t, http.MethodPost, "/invocations", nil, `{"text_input":"hi"}`)
	r.expect(t, "stream", 200, "data: {\"model_name\":\"text\",\"model_version\":\"1\",\"text_output\":\"hi\"}\n\n")
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	// A failure before streaming is a JSON error.
	e.do(t, http.MethodPost, "/invocations", nil, `{"other":1}`).expectError(t, "missing input", 400, "missing required input(s) ['text_input']")
}

// TestInvocationsGenerateRestricted: the base server's restriction applies
// to generate before the method check.
func TestInvocationsGenerateRestricted(t *testing.T) {
	root := generateRepo(t)
	for _, typ := range []string{"generate", "generate_stream"} {
		e := start(t, setup{repo: root, startup: []string{"text"}, sm: Options{DefaultModel: "text", InferenceType: typ},
			api: httpapi.Options{Restricted: map[string]httpapi.Restriction{"inference": {Key: "X-Auth", Value: "s"}}}})
		auth := map[string]string{"X-Auth": "s"}
		e.do(t, http.MethodPost, "/invocations", nil, `{"text_input":"a"}`).expectError(t, typ+" restricted", 403, "This API is restricted, expecting header 'X-Auth'")
		e.do(t, http.MethodGet, "/invocations", nil, "").expectError(t, typ+" GET restricted", 403, "restricted")
		e.do(t, http.MethodGet, "/invocations", auth, "").expect(t, typ+" GET", 405, `{"error":"Method Not Allowed"}`)
		e.do(t, http.MethodPost, "/invocations", auth, `{"text_input":"a"}`).expect(t, typ, 200, "*")
	}
}
