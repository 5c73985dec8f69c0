package main

import (
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
)

// TestEnsembleMetrics: an ensemble served by the binary answers /infer,
// SageMaker's /invocations and Vertex AI's predict route, and has its own
// nv_inference_* series beside its composing model's (which counts the
// ensemble's two steps per request).
func TestEnsembleMetrics(t *testing.T) {
	t.Setenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "chain")
	t.Setenv("AIP_PREDICT_ROUTE", "/predict")
	t.Setenv("AIP_HEALTH_ROUTE", "/health")
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
	})
	r := start(t, "--model-repository="+root, "--allow-sagemaker=true", "--sagemaker-port=0",
		"--allow-vertex-ai=true", "--vertex-ai-port=0", "--vertex-ai-default-model=chain")
	body := strings.NewReplacer("INPUT0", "IN0", "INPUT1", "IN1").Replace(readmeExample)
	if s, out := post(t, r.http+"/v2/models/chain/infer", body); s != 200 || !strings.Contains(out, `"name":"OUT0"`) {
		t.Fatalf("infer: %d %s", s, out)
	}
	if s, out := post(t, "http://"+r.addrs["SageMaker"]+"/invocations", body); s != 200 || !strings.Contains(out, `"model_name":"chain"`) {
		t.Fatalf("SageMaker: %d %s", s, out)
	}
	if s, out := post(t, "http://"+r.addrs["Vertex AI"]+"/predict", body); s != 200 || !strings.Contains(out, `"model_name":"chain"`) {
		t.Fatalf("Vertex AI: %d %s", s, out)
	}
	_, text := get(t, r.metrics+"/metrics")
	for series, want := range map[string]string{
		`nv_inference_request_success{model="chain",version="1"}`:  "3",
		`nv_inference_count{model="chain",version="1"}`:            "3",
		`nv_inference_exec_count{model="chain",version="1"}`:       "3",
		`nv_inference_request_success{model="simple",version="1"}`: "6",
	} {
		if got := metricValue(t, text, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
}
