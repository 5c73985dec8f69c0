package sagemaker

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMetricsOnServingPort: with SAGEMAKER_TRITON_METRICS_PATH the
// SageMaker port serves Prometheus metrics there, where an inference
// component's ContainerMetricsConfig scrapes (/metrics on 8080 unless
// configured otherwise); without it the path is an unknown route.
func TestMetricsOnServingPort(t *testing.T) {
	root := smeRepo(t)
	on := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "simple", MetricsPath: "/metrics"}})
	off := start(t, setup{repo: root, startup: []string{"simple"}, sm: Options{DefaultModel: "simple"}})

	on.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": ctJSON}, simpleJSON).expect(t, "infer", 200, "*")
	r := on.do(t, http.MethodGet, "/metrics", nil, "")
	want := `nv_inference_request_success{model="simple",version="1"} 1`
	if r.status != 200 || !strings.Contains(r.body, want) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("metrics: got %d (%s), want 200 text/plain with %q in\n%s", r.status, r.header.Get("Content-Type"), want, r.body)
	}
	off.do(t, http.MethodGet, "/metrics", nil, "").expect(t, "metrics off", 400, "")
}

func TestOptionsFromEnvPlatform(t *testing.T) {
	cases := []struct {
		env         map[string]string
		path        string
		timeout     time.Duration
		batch, ping string
	}{
		{nil, "", 0, "", "ready"},
		{map[string]string{"SAGEMAKER_TRITON_METRICS_PATH": "/metrics", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600",
			"SAGEMAKER_BATCH": "true", "SAGEMAKER_BATCH_STRATEGY": "MULTI_RECORD"}, "/metrics", time.Hour, MultiRecord, "ready"},
		// A timeout that is not a positive number of seconds means none.
		{map[string]string{"SAGEMAKER_MODEL_SERVER_TIMEOUT": "1h", "SAGEMAKER_TRITON_PING_MODE": "live"}, "", 0, "", "live"},
		{map[string]string{"SAGEMAKER_MODEL_SERVER_TIMEOUT": "-5"}, "", 0, "", "ready"},
	}
	for _, c := range cases {
		o := OptionsFromEnv(func(k string) string { return c.env[k] })
		if o.MetricsPath != c.path || o.InvocationTimeout != c.timeout || o.Batch.BatchStrategy != c.batch || o.PingMode != c.ping {
			t.Errorf("%v: got path %q timeout %v strategy %q ping %q", c.env, o.MetricsPath, o.InvocationTimeout, o.Batch.BatchStrategy, o.PingMode)
		}
	}
}
