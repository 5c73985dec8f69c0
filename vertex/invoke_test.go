package vertex

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/openai"
)

// listenInvoke serves a Vertex handler with invoke routes on a real
// listener, resolved; predict is AIP_PREDICT_ROUTE ("" when the Model has
// an invoke route prefix instead).
func listenInvoke(t *testing.T, models map[string]testModel, predict string) string {
	t.Helper()
	c, api := startCore(t, models, httpapi.Options{})
	h := New(c, api, Options{HealthRoute: healthRoute, PredictRoute: predict, InvokeRoutes: true, Logger: quiet})
	must(t, h.Resolve())
	_, base := listenHandler(t, h)
	return base
}

const sse = "text/event-stream; charset=utf-8"

// TestInvokeRoutes: a Model uploaded with invokeRoutePrefix "/*" on a
// dedicated endpoint gets "/invoke/<path>" as "/<path>", with the
// caller's method, headers and body: the v2 routes answer natively
// (including generate_stream's server-sent events and binary tensors after
// Inference-Header-Content-Length; POST, the invoke method's own, reads the
// GET-only routes), /metrics is served, and routes that
// change the server are refused 403 with no body. Several models need no
// default model when there is no predict route.
func TestInvokeRoutes(t *testing.T) {
	base := listenInvoke(t, map[string]testModel{"simple": simpleModel, "id1": id1Model}, "")
	binBody, binLen := simpleBinaryBody()
	cases := []routeCase{
		{name: "health route", method: "GET", path: healthRoute, status: 200, exact: empty},
		{name: "server ready", method: "GET", path: "/v2/health/ready", status: 200, exact: empty},
		{name: "server live", method: "GET", path: "/v2/health/live", status: 200, exact: empty},
		{name: "server metadata", method: "GET", path: "/v2", status: 200, contains: []string{`"extensions":[`}},
		{name: "model metadata", method: "GET", path: "/v2/models/simple", status: 200, contains: []string{`"platform":"onnxruntime_onnx"`}},
		{name: "model config", method: "GET", path: "/v2/models/id1/config", status: 200, contains: []string{`"name":"id1"`}},
		{name: "model ready", method: "GET", path: "/v2/models/id1/versions/1/ready", status: 200, exact: empty},
		{name: "stats", method: "GET", path: "/v2/models/stats", status: 200, contains: []string{`"name":"simple"`}},
		{name: "repository index", method: "POST", path: "/v2/repository/index", status: 200, contains: []string{`"state":"READY"`}},
		{name: "shm status", method: "GET", path: "/v2/systemsharedmemory/status", status: 200, exact: str("[]")},
		{name: "log settings read", method: "GET", path: "/v2/logging", status: 200, contains: []string{`"log_verbose_level"`}},
		{name: "trace settings read", method: "GET", path: "/v2/trace/setting", status: 200, contains: []string{`"trace_level"`}},
		{name: "infer JSON", path: "/v2/models/id1/infer", body: id1Body, status: 200, contains: []string{`"model_name":"id1"`, `"data":[1.0,2.0,3.0]`}},
		{name: "infer binary", path: "/v2/models/simple/infer", body: binBody,
			header: map[string]string{"Inference-Header-Content-Length": strconv.Itoa(binLen), "Content-Type": "application/octet-stream"}, status: 200, contains: []string{wantOutput0}},
		{name: "generate", path: "/v2/models/id1/generate", body: `{"INPUT0":[1,2.5]}`, status: 200,
			exact: str(`{"OUTPUT0":[1.0,2.5],"model_name":"id1","model_version":"1"}`)},
		{name: "generate_stream", path: "/v2/models/id1/generate_stream", body: `{"INPUT0":[1,2.5]}`, status: 200, ctype: sse,
			exact: str("data: {\"OUTPUT0\":[1.0,2.5],\"model_name\":\"id1\",\"model_version\":\"1\"}\n\n")},
		{name: "metrics", method: "GET", path: "/metrics", status: 200, contains: []string{"nv_inference_request_success"}},
		// The invoke method is a POST: read-only GET routes answer it too.
		{name: "POST model metadata", path: "/v2/models/simple", status: 200, contains: []string{`"platform":"onnxruntime_onnx"`}},
		{name: "POST versioned config", path: "/v2/models/id1/versions/1/config", status: 200, contains: []string{`"name":"id1"`}},
		{name: "POST model ready", path: "/v2/models/id1/ready", status: 200, exact: empty},
		{name: "POST model stats", path: "/v2/models/id1/stats", status: 200, contains: []string{`"name":"id1"`}},
		{name: "POST all stats", path: "/v2/models/stats", status: 200, contains: []string{`"name":"simple"`}},
		{name: "POST server ready", path: "/v2/health/ready", status: 200, exact: empty},
		{name: "POST server metadata", path: "/v2", status: 200, contains: []string{`"extensions":[`}},
		{name: "POST shm status", path: "/v2/cudasharedmemory/status", status: 200, exact: str("[]")},
		{name: "POST metrics", path: "/metrics", status: 200, contains: []string{"nv_inference_request_success"}},
		{name: "PUT model metadata", method: "PUT", path: "/v2/models/simple", status: 405, exact: str(notAllowed)},
		{name: "infer GET", method: "GET", path: "/v2/models/id1/infer", status: 405, exact: str(notAllowed)},
		{name: "unknown model", path: "/v2/models/nope/infer", body: id1Body, status: 404, contains: []string{"Request for unknown model: 'nope' is not found"}},
		{name: "unknown path", method: "GET", path: "/foo/bar", status: 404, exact: str(`{"error":"Not Found"}`)},
		// No predict route: the default shape is just another path.
		{name: "predict shape", path: predictRoute, body: id1Body, status: 404},
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v2/repository/models/id1/unload", ""},
		{"POST", "/v2/repository/models/id1/load", `{"parameters":{"config":"{}"}}`},
		{"POST", "/v2/repository/main/models/id1/load", ""},
		{"POST", "/v2/systemsharedmemory/region/r/register", `{"key":"/x","offset":0,"byte_size":64}`},
		{"POST", "/v2/systemsharedmemory/unregister", ""},
		{"POST", "/v2/cudasharedmemory/region/r/register", `{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":64}`},
		{"POST", "/v2/cudasharedmemory/region/r/unregister", ""},
		{"POST", "/v2/logging", `{"log_verbose_level":3}`},
		{"POST", "/v2/trace/setting", `{"trace_rate":"1"}`},
		{"POST", "/v2/models/id1/trace/setting", `{"trace_rate":"1"}`},
		{"PUT", "/v2/logging", `{"log_verbose_level":3}`},
	} {
		cases = append(cases, routeCase{name: "refused " + c.method + " " + c.path, method: c.method, path: c.path, body: c.body, status: 403, exact: empty})
	}
	cases = append(cases, routeCase{name: "id1 still served", path: "/v2/models/id1/infer", body: id1Body, status: 200})
	runRoutes(t, base, cases)
}

// TestInvokeOpenAIRoutes: the OpenAI and TEI routes mounted on the base
// API (platforms/openai) answer through invoke routes too, OpenAI's model
// list on the invoke method's POST as on GET.
func TestInvokeOpenAIRoutes(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{})
	openai.New(api, openai.Options{Logger: quiet}).Mount(api.Router())
	h := New(c, api, Options{HealthRoute: healthRoute, InvokeRoutes: true, Logger: quiet})
	must(t, h.Resolve())
	_, base := listenHandler(t, h)
	runRoutes(t, base, []routeCase{
		{name: "models list", method: "GET", path: "/v1/models", status: 200, contains: []string{`"object":"list"`, `"id":"id1"`}},
		{name: "POST models list", path: "/v1/models", status: 200, contains: []string{`"object":"list"`, `"id":"id1"`}},
		{name: "POST one model", path: "/v1/models/id1", status: 200, contains: []string{`"id":"id1"`, `"object":"model"`}},
		{name: "embeddings, unknown model", path: "/v1/embeddings", body: `{"model":"nope","input":"hi"}`, status: 404,
			contains: []string{`"code":"model_not_found"`}},
		{name: "TEI embed, no text model", path: "/embed", body: `{"inputs":"hi"}`, status: 400, contains: []string{`"error_type"`}},
	})
}

// TestInvokeWithPredictRoute: with a predict route too, the predict route
// keeps Vertex's rules ("instances", redirect) and other paths are the
// native routes; without invoke routes, other paths stay 400.
func TestInvokeWithPredictRoute(t *testing.T) {
	base := listenInvoke(t, map[string]testModel{"id1": id1Model}, predictRoute)
	runRoutes(t, base, []routeCase{
		{name: "instances on predict", body: `{"instances":[[1,2]]}`, status: 200, exact: str(`{"predictions":[[1.0,2.0]]}`)},
		{name: "redirect still read-only", header: redirect("v2/repository/models/id1/unload"), status: 403, exact: empty},
		{name: "native infer", path: "/v2/models/id1/infer", body: id1Body, status: 200, contains: []string{`"model_name":"id1"`}},
	})
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{})
	_, plain := listen(t, c, api, "", true)
	runRoutes(t, plain, []routeCase{
		{name: "native path without invoke routes", path: "/v2/models/id1/infer", body: id1Body, status: 400, exact: empty},
		{name: "metrics without invoke routes", method: "GET", path: "/metrics", status: 400, exact: empty},
	})
}

// TestInvokeOptions: with invoke routes AIP_PREDICT_ROUTE may be unset;
// AIP_HEALTH_ROUTE is still required. Without a predict route and with a
// default model named, that model must be loaded.
func TestInvokeOptions(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(map[string]string{"AIP_HEALTH_ROUTE": healthRoute}), "", true)
	if err != nil || o.PredictRoute != "" || !o.InvokeRoutes {
		t.Fatalf("%+v, %v", o, err)
	}
	if _, err := OptionsFromEnv(env(map[string]string{}), "", true); err == nil || err.Error() != MsgNoHealthRoute {
		t.Fatalf("no health route: %v", err)
	}
	if _, err := OptionsFromEnv(env(map[string]string{"AIP_HEALTH_ROUTE": healthRoute}), "", false); err == nil || err.Error() != MsgNoPredictRoute {
		t.Fatalf("no predict route without invoke: %v", err)
	}
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{})
	h := New(c, api, Options{HealthRoute: healthRoute, InvokeRoutes: true, DefaultModel: "nope", Logger: quiet})
	if err := h.Resolve(); err == nil || err.Error() != "Expect the default model 'nope' is loaded" {
		t.Fatalf("Resolve: %v", err)
	}
	// A panic's 500 names an invoke route's model.
	for path, want := range map[string]string{"/v2/models/id1/infer": "id1", "/v2/repository/models/m/load": "m", "/metrics": "", healthRoute: ""} {
		if got := h.modelOf(httptest.NewRequest(http.MethodPost, path, nil)); got != want {
			t.Errorf("model of %s: %q, want %q", path, got, want)
		}
	}
}

// TestStreamRawPredict: streamRawPredict reaches the predict route; a
// caller that accepts server-sent events gets the default model's
// generate_stream (events relayed by Vertex as they come), others the
// ordinary prediction.
func TestStreamRawPredict(t *testing.T) {
	restricted := map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "inference:X-Auth=secret"))
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Restricted: restricted})
	_, base := listen(t, c, api, "", true)
	event := "data: {\"OUTPUT0\":[1.0,2.5],\"model_name\":\"id1\",\"model_version\":\"1\"}\n\n"
	auth := func(h map[string]string) map[string]string { h["X-Auth"] = "secret"; return h }
	runRoutes(t, base, []routeCase{
		{name: "events", header: auth(map[string]string{"Accept": "text/event-stream", "Content-Type": "application/json"}), body: `{"INPUT0":[1,2.5]}`,
			status: 200, ctype: sse, exact: &event},
		{name: "events among others", header: auth(map[string]string{"Accept": "application/json;q=0.5, Text/Event-Stream"}), body: `{"INPUT0":[1,2.5]}`,
			status: 200, ctype: sse, exact: &event},
		{name: "events, bad input", header: auth(map[string]string{"Accept": "text/event-stream"}), body: `{"INPUT1":[1]}`,
			status: 400, ctype: "application/json", contains: []string{`{"error":"`}},
		{name: "events, restricted", header: map[string]string{"Accept": "text/event-stream"}, body: `{"INPUT0":[1]}`,
			status: 403, exact: str(`{"error":"This API is restricted, expecting header 'X-Auth'"}`)},
		{name: "events, GET", method: "GET", header: auth(map[string]string{"Accept": "text/event-stream"}), status: 405, exact: str(notAllowed)},
		{name: "JSON caller", header: auth(map[string]string{"Accept": "application/json"}), body: id1Body, status: 200, ctype: "application/json",
			contains: []string{`"data":[1.0,2.0,3.0]`}},
	})

	// The events arrive on a real connection as a stream a client reads
	// line by line.
	req, err := http.NewRequest(http.MethodPost, base+predictRoute, strings.NewReader(`{"INPUT0":[4,5]}`))
	must(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Auth", "secret")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	must(t, err)
	if want := "data: {\"OUTPUT0\":[4.0,5.0],\"model_name\":\"id1\",\"model_version\":\"1\"}\n"; line != want {
		t.Fatalf("first line %q, want %q", line, want)
	}
}

// TestStreamRawPredictDecoupled: a decoupled default model's responses
// reach a streamRawPredict caller as separate events while the model is
// still producing, and a caller that goes away ends the request as
// cancelled.
func TestStreamRawPredictDecoupled(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")}}, httpapi.Options{})
	_, base := listen(t, c, api, "", true)
	header := map[string]string{"Accept": "text/event-stream"}
	runRoutes(t, base, []routeCase{{name: "three responses", header: header, body: `{"IN":[7,8,9]}`, status: 200, ctype: sse,
		exact: str(`data: {"IDX":0,"OUT":7,"model_name":"repeat","model_version":"1"}` + "\n\n" +
			`data: {"IDX":1,"OUT":8,"model_name":"repeat","model_version":"1"}` + "\n\n" +
			`data: {"IDX":2,"OUT":9,"model_name":"repeat","model_version":"1"}` + "\n\n")}})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+predictRoute,
		strings.NewReader(`{"IN":[`+strings.TrimSuffix(strings.Repeat("1,", 100000), ",")+`],"wait_us":100}`))
	must(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	must(t, err)
	if want := `data: {"IDX":0,"OUT":1,"model_name":"repeat","model_version":"1"}` + "\n"; line != want {
		t.Fatalf("first event %q, want %q", line, want)
	}
	cancel()
	resp.Body.Close()
	servertest.WaitCancelled(t, c, "repeat", 20*time.Second)
}
