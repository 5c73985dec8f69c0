package main

import (
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
)

// TestVertexInvokeRoutes: a Model uploaded with invokeRoutePrefix "/*"
// has no AIP_PREDICT_ROUTE; with --vertex-ai-invoke-routes the server
// starts over two models without a default one and serves the native v2
// routes (generate_stream's events included) on the Vertex port, while
// model control stays refused.
func TestVertexInvokeRoutes(t *testing.T) {
	t.Setenv("AIP_MODE", "PREDICTION")
	t.Setenv("AIP_HTTP_PORT", "0")
	t.Setenv("AIP_HEALTH_ROUTE", "/health")
	t.Setenv("AIP_PREDICT_ROUTE", "")
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
	})
	r := start(t, "--model-repository="+root, "--allow-metrics=false", "--vertex-ai-invoke-routes=true")
	base := "http://" + r.addrs["Vertex AI"]
	if s, _ := get(t, base+"/health"); s != 200 {
		t.Fatalf("health route: %d", s)
	}
	if s, body := get(t, base+"/v2/models/chain"); s != 200 || !strings.Contains(body, `"name":"chain"`) {
		t.Fatalf("model metadata: %d %s", s, body)
	}
	if s, body := post(t, base+"/v2/models/simple/infer", readmeExample); s != 200 || !strings.Contains(body, `"model_name":"simple"`) {
		t.Fatalf("infer: %d %s", s, body)
	}
	gen := `{"INPUT0":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}`
	if s, body := post(t, base+"/v2/models/simple/generate_stream", gen); s != 200 || !strings.HasPrefix(body, `data: {"OUTPUT0":[2,3,4`) {
		t.Fatalf("generate_stream: %d %s", s, body)
	}
	if s, body := post(t, base+"/v2/repository/models/simple/unload", ""); s != 403 || body != "" {
		t.Fatalf("unload: %d %q", s, body)
	}
	if s, _ := post(t, base+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatalf("infer after the refused unload: %d", s)
	}
}
