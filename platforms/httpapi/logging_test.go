package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/protocol"
)

// serveAPI serves New(core over root, opts) on a loopback listener.
func serveAPI(t *testing.T, root string, opts Options, backends ...core.Backend) string {
	t.Helper()
	srv := servertest.Start(t, servertest.Options{Repo: root, Backends: backends})
	hs := httptest.NewServer(New(srv, opts))
	t.Cleanup(hs.Close)
	return hs.URL
}

const simpleInfer = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},` +
	`{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

// /v2/logging changes the settings the server's own logger obeys: the
// switches, the verbose level (1: Triton's line for each HTTP request, and
// each inference request's path, model and version; 2: also its inputs)
// and the format, from the next line on.
func TestLoggingDrivesTheLogger(t *testing.T) {
	out := &servertest.LogBuffer{}
	logs := logging.New("/var/log/inferd.log", logging.Default())
	base := serveAPI(t, writeRepo(t, standardModels(t)), Options{Logs: logs, Logger: slog.New(logs.Handler(out))})
	log := slog.New(logs.Handler(out)) // another logger over the same settings, as cmd's core and gRPC loggers

	for _, step := range []struct {
		name, body string
		want       logging.State
		line       []string // what an inference logs; nil: nothing
	}{
		{"defaults", `{}`, logging.Default(), nil},
		{"verbose 1", `{"log_verbose_level":1}`, logging.State{Info: true, Warning: true, Error: true, Verbose: 1},
			[]string{` logging.go:`, `] "HTTP request: 2 /v2/models/simple/infer"` + "\n",
				`I`, ` infer.go:`, `] "inference request" protocol=HTTP path=/v2/models/simple/infer model=simple version=1` + "\n"}},
		{"verbose 2 in ISO8601", `{"log_verbose_level":2,"log_format":"ISO8601"}`, logging.State{Info: true, Warning: true, Error: true, Verbose: 2, Format: logging.FormatISO8601},
			[]string{`Z I `, `] "HTTP request: 2 /v2/models/simple/infer"`, `] "inference request" protocol=HTTP`, ` inputs="INPUT0 INT32 [1,16], INPUT1 INT32 [1,16]"` + "\n"}},
		{"verbose off, info off", `{"log_verbose_level":0,"log_info":false,"log_format":"default"}`, logging.State{Warning: true, Error: true}, nil},
	} {
		status, _, body := post(t, base+"/v2/logging", step.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", step.name, status, body)
		}
		if got := logs.Load(); got != step.want {
			t.Fatalf("%s: settings %+v, want %+v", step.name, got, step.want)
		}
		if !strings.Contains(string(body), `"log_file":"/var/log/inferd.log"`) {
			t.Fatalf("%s: %s", step.name, body)
		}
		out.Take()
		if status, _, body := post(t, base+"/v2/models/simple/infer", simpleInfer); status != 200 {
			t.Fatalf("%s: infer %d %s", step.name, status, body)
		}
		got := out.Take()
		if step.line == nil && got != "" {
			t.Errorf("%s: logged %q", step.name, got)
		}
		for _, want := range step.line {
			if !strings.Contains(got, want) {
				t.Errorf("%s: log %q lacks %q", step.name, got, want)
			}
		}
		log.Info("info line")
		log.Warn("warning line")
		got = out.Take()
		if strings.Contains(got, "info line") != step.want.Info || !strings.Contains(got, "warning line") {
			t.Errorf("%s: info %v, logged %q", step.name, step.want.Info, got)
		}
	}
}

// The logging category of --http-restricted-api guards both methods and
// nothing else.
func TestLoggingRestricted(t *testing.T) {
	logs := logging.New("", logging.Default())
	base := serveAPI(t, writeRepo(t, standardModels(t)), Options{Logs: logs,
		Restricted: map[string]Restriction{"logging": {Key: "log-key", Value: "v"}}})
	for _, tt := range []struct {
		method, value string
		status        int
		body          string
	}{
		{http.MethodGet, "", 403, `{"error":"This API is restricted, expecting header 'log-key'"}`},
		{http.MethodPost, "", 403, `{"error":"This API is restricted, expecting header 'log-key'"}`},
		{http.MethodPost, "V", 403, `{"error":"This API is restricted, expecting header 'log-key'"}`},
		{http.MethodPut, "", 403, `{"error":"This API is restricted, expecting header 'log-key'"}`},
		{http.MethodGet, "v", 200, `{"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"}`},
		{http.MethodPost, "v", 200, `{"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":4,"log_format":"default"}`},
		{http.MethodPut, "v", 405, `{"error":"Method Not Allowed"}`},
	} {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Log-Key", tt.value)
		}
		status, _, body := do(t, tt.method, base+"/v2/logging", h, strings.NewReader(`{"log_verbose_level":4}`))
		if status != tt.status || string(body) != tt.body {
			t.Errorf("%s with %q: %d %s, want %d %s", tt.method, tt.value, status, body, tt.status, tt.body)
		}
	}
	if logs.Load().Verbose != 4 {
		t.Fatalf("settings %+v", logs.Load())
	}
	if status, _, body := post(t, base+"/v2/models/simple/infer", simpleInfer); status != 200 {
		t.Fatalf("infer %d %s", status, body)
	}
}

// pythonBackendT is the Python backend for a test.
func pythonBackendT(t *testing.T) core.Backend {
	b := python.New(python.Options{Executable: servertest.Python(t), ArenaBytes: python.DefaultArenaBytes})
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// paramsOf is the parameters a params model saw, from its infer answer.
func paramsOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var resp struct {
		Outputs []struct {
			Data []string `json:"data"`
		} `json:"outputs"`
	}
	must(t, json.Unmarshal(body, &resp))
	if len(resp.Outputs) != 1 || len(resp.Outputs[0].Data) != 1 {
		t.Fatalf("answer %s", body)
	}
	var params map[string]any
	must(t, json.Unmarshal([]byte(resp.Outputs[0].Data[0]), &params))
	return params
}

// --http-header-forward-pattern: matching headers reach a model.py's
// request.parameters() as strings, under lower-case names, beside the
// body's parameters; reserved names are refused with Triton's 400; the
// headers of restricted APIs are never forwarded; /generate forwards
// nothing, as in Triton.
func TestHeaderForwarding(t *testing.T) {
	root := t.TempDir()
	servertest.WriteParamsModel(t, root, "params")
	restricted := map[string]Restriction{"inference": {Key: "Infer-Key", Value: "secret"}}
	serve := func(pattern string) string {
		fw, err := protocol.NewHeaderForwarder(pattern, "Infer-Key")
		must(t, err)
		return serveAPI(t, root, Options{HeaderForward: fw, Restricted: restricted}, pythonBackendT(t))
	}
	const body = `{"parameters":{"p":1,"my-key":"from body"},"inputs":[{"name":"IN","shape":[1],"datatype":"FP32","data":[1]}]}`
	auth := func(h http.Header) http.Header { h.Set("Infer-Key", "secret"); return h }
	for _, tt := range []struct {
		name, pattern string
		header        http.Header
		status        int
		params        map[string]any // exactly; for 200
		err           string         // the body, for errors
	}{
		{name: "off", pattern: "", header: http.Header{"My-Key": {"v"}}, status: 200,
			params: map[string]any{"p": 1.0, "my-key": "from body"}},
		{name: "matching headers as lower-case string parameters", pattern: "my-|^x-",
			header: http.Header{"My-Key": {"v"}, "X-Trace": {"1"}, "Other": {"o"}}, status: 200,
			params: map[string]any{"p": 1.0, "my-key": "v", "x-trace": "1"}},
		{name: "case-insensitive pattern", pattern: "MY_HEADER.*",
			header: http.Header{"My_header_1": {"a b"}, "my_header_2": {`"quoted" \`}}, status: 200,
			params: map[string]any{"p": 1.0, "my-key": "from body", "my_header_1": "a b", "my_header_2": `"quoted" \`}},
		{name: "restricted header never forwarded", pattern: "key",
			header: http.Header{"Api-Key": {"k"}}, status: 200,
			params: map[string]any{"p": 1.0, "my-key": "from body", "api-key": "k"}},
		{name: "reserved header sequence_id", pattern: "sequence_id",
			header: http.Header{"sequence_id": {"1"}}, status: 400,
			err: `{"error":"Header 'sequence_id' is reserved for Triton usage and cannot be forwarded."}`},
		{name: "triton_ header", pattern: "triton",
			header: http.Header{"Triton_Anything": {"1"}}, status: 400,
			err: `{"error":"Header 'triton_anything' is reserved for Triton usage and cannot be forwarded."}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := serve(tt.pattern)
			status, _, got := do(t, http.MethodPost, base+"/v2/models/params/infer", auth(tt.header), strings.NewReader(body))
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, got)
			}
			if tt.status != 200 {
				if string(got) != tt.err {
					t.Fatalf("body %s, want %s", got, tt.err)
				}
				return
			}
			params := paramsOf(t, got)
			if len(params) != len(tt.params) {
				t.Errorf("parameters %v, want %v", params, tt.params)
			}
			for k, v := range tt.params {
				if params[k] != v {
					t.Errorf("parameter %s = %v, want %v (all: %v)", k, params[k], v, params)
				}
			}
		})
	}
	t.Run("generate forwards nothing", func(t *testing.T) {
		base := serve(".*")
		status, _, got := do(t, http.MethodPost, base+"/v2/models/params/generate", auth(http.Header{"My-Key": {"v"}}), strings.NewReader(`{"IN":[1]}`))
		if status != 200 {
			t.Fatalf("%d %s", status, got)
		}
		var resp struct {
			Params string `json:"PARAMS"`
		}
		must(t, json.Unmarshal(got, &resp))
		if resp.Params != "{}" {
			t.Fatalf("parameters %s", resp.Params)
		}
	})
}

// Every route gets Triton's verbose "HTTP request" line, not only
// inference: health, metadata, unknown paths.
func TestLogRequestsEveryRoute(t *testing.T) {
	out := &servertest.LogBuffer{}
	logs := logging.New("", logging.State{Verbose: 1})
	base := serveAPI(t, writeRepo(t, standardModels(t)), Options{Logs: logs, Logger: slog.New(logs.Handler(out))})
	for _, tt := range []struct{ method, path, want string }{
		{http.MethodGet, "/v2/health/ready", `"HTTP request: 0 /v2/health/ready"`},
		{http.MethodGet, "/v2/models/simple", `"HTTP request: 0 /v2/models/simple"`},
		{http.MethodPost, "/v2/repository/index", `"HTTP request: 2 /v2/repository/index"`},
		{http.MethodGet, "/v2/models/a%2Fb/config?x=1", `"HTTP request: 0 /v2/models/a%2Fb/config"`},
		{http.MethodDelete, "/nowhere", `"HTTP request: 4 /nowhere"`},
	} {
		out.Take()
		do(t, tt.method, base+tt.path, nil, strings.NewReader(""))
		if got := out.Take(); !strings.Contains(got, "] "+tt.want+"\n") || !strings.HasPrefix(got, "I") {
			t.Errorf("%s %s: logged %q, want %s", tt.method, tt.path, got, tt.want)
		}
	}
}

// With verbose logging off the middleware adds no allocation to a request.
func TestLogRequestsOffAllocates(t *testing.T) {
	logs := logging.New("", logging.Default())
	h := LogRequests(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), logs, slog.New(logs.Handler(io.Discard)))
	r := httptest.NewRequest(http.MethodPost, "/v2/models/simple/infer", nil)
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// BenchmarkLogRequestsOff is what the middleware costs a request while
// verbose logging is off.
func BenchmarkLogRequestsOff(b *testing.B) {
	logs := logging.New("", logging.Default())
	h := LogRequests(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), logs, slog.New(logs.Handler(io.Discard)))
	r := httptest.NewRequest(http.MethodPost, "/v2/models/simple/infer", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
