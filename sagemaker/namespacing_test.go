package sagemaker

import (
	"net/http"
	"path/filepath"
	"testing"
)

// TestNamespacingUnknownModel: with model namespacing, which `serve` turns
// on, an unknown model is Triton's INVALID_ARG, so /invocations answers
// 400 where it answers 404 without (TestInvocationsDefaultModel).
func TestNamespacingUnknownModel(t *testing.T) {
	root := smeRepo(t)
	body := `{"INPUT0":` + ints(16, 0) + `,"INPUT1":` + ints(16, 0) + `}`
	for _, c := range []struct {
		what string
		sm   Options
		req  string
		msg  string
	}{
		{"unspecified default", OptionsFromEnv(func(string) string { return "" }), simpleJSON,
			"Request for unknown model: 'unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME' is not found"},
		// A folder that was never loaded is as unknown (not in the global map).
		{"not loaded", Options{DefaultModel: "id1"}, simpleJSON, "Request for unknown model: 'id1' is not found"},
		{"generate unknown", Options{DefaultModel: "nope", InferenceType: "generate"}, body, "Request for unknown model: 'nope' is not found"},
		{"generate slash", Options{DefaultModel: "a/b", InferenceType: "generate_stream"}, body, "Request for unknown model: 'a/b' is not found"},
		{"infer slash", Options{DefaultModel: "a/b"}, simpleJSON, "Request for unknown model: 'a/b' is not found"},
	} {
		e := start(t, setup{repo: root, startup: []string{"simple"}, namespacing: true, sm: c.sm})
		e.do(t, http.MethodPost, "/invocations", nil, c.req).expectError(t, c.what, 400, c.msg)
	}
	e := start(t, setup{repo: root, startup: []string{"simple"}, namespacing: true, sm: Options{DefaultModel: "simple"}})
	e.do(t, http.MethodPost, "/invocations", nil, simpleJSON).expect(t, "simple", 200, "*")
}

// TestNamespacingMME: a multi-model endpoint under namespacing loads,
// serves, unloads and loads again each model from its own registered
// repository.
func TestNamespacingMME(t *testing.T) {
	root := t.TempDir()
	e := start(t, setup{namespacing: true, sm: Options{PingMode: "live", ModelsRoot: root}})
	writeModel(t, filepath.Join(root, "aaa", "model"), simpleConfig, simpleONNX)
	writeModel(t, filepath.Join(root, "bbb", "model"), simpleConfig, simpleONNX)
	for _, id := range []string{"a", "b"} {
		e.do(t, http.MethodPost, "/models", nil, loadBody(id, root+"/"+id+id+id+"/model")).expect(t, "load "+id, 200, "")
		e.do(t, http.MethodPost, "/models/"+id+"/invoke", nil, simpleJSON).expect(t, "invoke "+id, 200, "*")
	}
	e.do(t, http.MethodDelete, "/models/a", nil, "").expect(t, "unload a", 200, "")
	e.do(t, http.MethodPost, "/models/a/invoke", nil, simpleJSON).expect(t, "invoke unloaded a", 404, "*")
	e.do(t, http.MethodPost, "/models/b/invoke", nil, simpleJSON).expect(t, "invoke b after a's unload", 200, "*")
	e.do(t, http.MethodPost, "/models", nil, loadBody("a", root+"/aaa/model")).expect(t, "load a again", 200, "")
	e.do(t, http.MethodPost, "/models/a/invoke", nil, simpleJSON).expect(t, "invoke a again", 200, "*")
}
