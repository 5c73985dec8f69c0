package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestAllowModelFileOverride: --allow-model-file-override=false refuses a
// load request's file: parameters (400, naming the option); by default
// they load, as in Triton.
func TestAllowModelFileOverride(t *testing.T) {
	onnx, err := os.ReadFile(filepath.Join("..", "..", "examples", "model_repository", "simple", "1", "model.onnx"))
	must(t, err)
	body, _ := json.Marshal(map[string]any{"parameters": map[string]string{
		"config":            `{"platform":"onnxruntime_onnx"}`,
		"file:1/model.onnx": base64.StdEncoding.EncodeToString(onnx),
	}})
	const refusal = `{"error":"load failed for model 'uploaded': loading model files from the load request ('file:' parameters) is disabled by --allow-model-file-override=false"}`
	for _, tt := range []struct {
		args   []string
		status int
		body   string
	}{
		{nil, 200, ""},
		{[]string{"--allow-model-file-override=true"}, 200, ""},
		{[]string{"--allow-model-file-override=false"}, 400, refusal},
	} {
		r := start(t, append([]string{"--model-repository=../../examples/model_repository", "--model-control-mode=explicit", "--allow-metrics=false"}, tt.args...)...)
		status, got := post(t, r.http+"/v2/repository/models/uploaded/load", string(body))
		if status != tt.status || (tt.body != "" && got != tt.body) {
			t.Errorf("%v: %d %s, want %d %s", tt.args, status, got, tt.status, tt.body)
		}
		_ = r.stop(t)
	}
}
