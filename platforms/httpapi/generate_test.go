package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// intSeq is a JSON array of n consecutive integers from start.
func intSeq(start, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(start + i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// simpleGenerateBody is a generate body for `simple`: INPUT0 = 0..15,
// INPUT1 = 1 everywhere.
var simpleGenerateBody = `{"INPUT0":` + intSeq(0, 16) + `,"INPUT1":` + "[1" + strings.Repeat(",1", 15) + "]}"

// TestGenerate covers /generate's response object: one flat JSON object,
// keys byte-wise sorted, a 1-element output as a bare scalar.
func TestGenerate(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})

	// BYTES identity: a string member is the input, the 1-element output
	// comes back as a bare string; keys are byte-wise sorted.
	status, h, body := post(t, base+"/v2/models/id_bytes/generate", `{"INPUT0":"hi"}`)
	if status != 200 || h.Get("Content-Type") != "application/json" || string(body) != `{"OUTPUT0":"hi","model_name":"id_bytes","model_version":"1"}` {
		t.Errorf("id_bytes: %d %q %s", status, h.Get("Content-Type"), body)
	}
	// Triton sends the object chunked.
	if te := h.Get("Content-Length"); te != "" {
		t.Errorf("id_bytes: Content-Length %q, want a chunked reply", te)
	}

	// A one-element array is a scalar too; id comes back and other members
	// are request parameters (ignored by the model).
	status, _, body = post(t, base+"/v2/models/id_bytes/versions/1/generate", `{"id":"r1","INPUT0":["x\"y"],"temperature":0.5,"max_tokens":3,"stream":false,"parameters":{"a":"b"}}`)
	if status != 200 || string(body) != `{"OUTPUT0":"x\"y","id":"r1","model_name":"id_bytes","model_version":"1"}` {
		t.Errorf("id_bytes id: %d %s", status, body)
	}

	// simple: INT32 [16] arrays; the 16-element outputs are arrays.
	status, _, body = post(t, base+"/v2/models/simple/generate", simpleGenerateBody)
	want := `{"OUTPUT0":` + intSeq(1, 16) + `,"OUTPUT1":` + intSeq(-1, 16) + `,"model_name":"simple","model_version":"1"}`
	if status != 200 || string(body) != want {
		t.Errorf("simple: %d %s, want %s", status, body, want)
	}

	// FP32 identity with a variable dim: a scalar fills [1,1], an array
	// [1,E], an empty array [1,0].
	for in, out := range map[string]string{`1.5`: `1.5`, `[1,2.5,-3]`: `[1.0,2.5,-3.0]`, `[]`: `[]`} {
		status, _, body = post(t, base+"/v2/models/id1/generate", `{"INPUT0":`+in+`}`)
		if want := `{"OUTPUT0":` + out + `,"model_name":"id1","model_version":"1"}`; status != 200 || string(body) != want {
			t.Errorf("id1 %s: %d %s, want %s", in, status, body, want)
		}
	}
}

// TestGenerateStream covers /generate_stream's SSE events (`data: <json>`,
// text/event-stream, no [DONE]).
func TestGenerateStream(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	for _, c := range []struct{ model, body, event string }{
		{"id_bytes", `{"INPUT0":"hi"}`, `{"OUTPUT0":"hi","model_name":"id_bytes","model_version":"1"}`},
		{"simple", simpleGenerateBody, `{"OUTPUT0":` + intSeq(1, 16) + `,"OUTPUT1":` + intSeq(-1, 16) + `,"model_name":"simple","model_version":"1"}`},
		// Decoupled models are allowed on generate (one response here).
		{"decoupled", `{"INPUT0":[2]}`, `{"OUTPUT0":2.0,"model_name":"decoupled","model_version":"1"}`},
	} {
		status, h, body := post(t, base+"/v2/models/"+c.model+"/generate_stream", c.body)
		if status != 200 || h.Get("Content-Type") != "text/event-stream; charset=utf-8" {
			t.Errorf("%s: %d %q", c.model, status, h.Get("Content-Type"))
		}
		if want := "data: " + c.event + "\n\n"; string(body) != want {
			t.Errorf("%s: body %q, want %q", c.model, body, want)
		}
		if bytes.Contains(body, []byte("[DONE]")) {
			t.Errorf("%s: [DONE] event", c.model)
		}
		var v map[string]any
		if err := json.Unmarshal(bytes.TrimSuffix(bytes.TrimPrefix(body, []byte("data: ")), []byte("\n\n")), &v); err != nil {
			t.Errorf("%s: event is not JSON: %v", c.model, err)
		}
	}
	// Errors before inference are ordinary JSON replies.
	status, h, body := post(t, base+"/v2/models/id_fp16/generate_stream", `{"INPUT0":[1]}`)
	if status != 400 || h.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(body), `{"error":"receiving FP16 data via JSON`) {
		t.Errorf("fp16 stream: %d %q %q", status, h.Get("Content-Type"), body)
	}
}

// TestGenerateResponseObject: keys are sorted byte-wise, parameters are
// members, and an output that JSON cannot carry fails.
func TestGenerateResponseObject(t *testing.T) {
	resp := &core.InferResponse{ID: "q", ModelName: "m", ModelVersion: 3,
		Parameters: map[string]any{"Z": int64(-2), "flag": true, "p": 0.25},
		Outputs: []*core.Tensor{
			{Name: "TEXT", DataType: core.TypeBytes, Shape: []int64{1, 1}, Data: core.AppendBytesElement(nil, []byte("hi"))},
			{Name: "EMPTY", DataType: core.TypeInt32, Shape: []int64{1, 0}},
			{Name: "_i", DataType: core.TypeInt64, Shape: []int64{}, Data: make([]byte, 8)},
		}}
	got, err := appendGenerateResponse(nil, resp)
	want := `{"EMPTY":[],"TEXT":"hi","Z":-2,"_i":0,"flag":true,"id":"q","model_name":"m","model_version":"3","p":0.25}`
	if err != nil || string(got) != want {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	resp.Outputs = []*core.Tensor{{Name: "H", DataType: core.TypeFP16, Shape: []int64{1}, Data: make([]byte, 2)}}
	if _, err := appendGenerateResponse(nil, resp); err == nil {
		t.Error("FP16 output encoded")
	}
	resp.Outputs, resp.Parameters = nil, map[string]any{"b": []byte("x")}
	var ce *core.Error
	if _, err := appendGenerateResponse(nil, resp); !errors.As(err, &ce) || ce.Code != core.CodeUnsupported {
		t.Errorf("BYTES parameter: %v", err)
	}
}

// TestGenerateErrors covers a compressed body, a missing required input,
// model lookup errors, conversion errors, 405 and the restricted API.
func TestGenerateErrors(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	type tc struct {
		name, path, body string
		header           http.Header
		status           int
		msg              string // exact error message
	}
	cases := []tc{
		{name: "gzip", path: "simple/generate", body: simpleGenerateBody, header: http.Header{"Content-Encoding": {"gzip"}},
			status: 400, msg: "Unsupported content-encoding, only 'identity' is supported."},
		{name: "deflate stream", path: "simple/generate_stream", body: simpleGenerateBody, header: http.Header{"Content-Encoding": {"deflate"}},
			status: 400, msg: "Unsupported content-encoding, only 'identity' is supported."},
		{name: "unknown model", path: "nope/generate", body: `{}`, header: http.Header{"Content-Encoding": {"gzip"}},
			status: 404, msg: "Request for unknown model: 'nope' is not found"},
		{name: "unknown version", path: "simple/versions/7/generate_stream", body: `{}`,
			status: 404, msg: "Request for unknown model: 'simple' version 7 is not found"},
		{name: "empty body", path: "simple/generate", body: ``,
			status: 500, msg: "failed to parse the request JSON buffer: The document is empty. at 0"},
		{name: "bad shape", path: "simple/generate", body: `{"INPUT0":[1,2,3]}`,
			status: 400, msg: "The schema can not convert input 'INPUT0' to tensor with proper shape"},
		{name: "duplicate input", path: "id1/generate", body: `{"INPUT0":[1],"INPUT0":[2]}`,
			status: 400, msg: "input 'INPUT0' already exists in request"},
		{name: "bad parameter", path: "id1/generate", body: `{"INPUT0":[1],"stop":["a"]}`,
			status: 400, msg: "parameter 'stop' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "bad nested parameter", path: "id1/generate", body: `{"INPUT0":[1],"parameters":{"x":null}}`,
			status: 400, msg: "Converting keyword: 'parameters': parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "parameters not object", path: "id1/generate", body: `{"INPUT0":[1],"parameters":1}`,
			status: 500, msg: "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"},
		{name: "id not string", path: "id1/generate", body: `{"id":1,"INPUT0":[1]}`,
			status: 500, msg: "attempt to access JSON non-string as string"},
		{name: "bytes needs strings", path: "id_bytes/generate", body: `{"INPUT0":1}`,
			status: 500, msg: "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{name: "int needs ints", path: "simple/generate", body: `{"INPUT0":[1.5` + strings.Repeat(",1", 15) + `]}`,
			status: 500, msg: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{name: "fp16 input", path: "id_fp16/generate", body: `{"INPUT0":[1]}`,
			status: 400, msg: "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0"},
	}
	for _, c := range cases {
		status, h, body := do(t, http.MethodPost, base+"/v2/models/"+c.path, c.header, strings.NewReader(c.body))
		want := `{"error":` + strconv.Quote(c.msg) + `}`
		if status != c.status || string(body) != want || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s (%s), want %d %s", c.name, status, body, h.Get("Content-Type"), c.status, want)
		}
	}

	// A missing required input is the core's 400, as JSON.
	for _, route := range []string{"generate", "generate_stream"} {
		status, h, body := post(t, base+"/v2/models/simple/"+route, `{"INPUT0":`+intSeq(0, 16)+`}`)
		if status != 400 || h.Get("Content-Type") != "application/json" || !strings.Contains(string(body), "missing required input(s) ['INPUT1']") {
			t.Errorf("missing input %s: %d %q %s", route, status, h.Get("Content-Type"), body)
		}
	}

	// Only POST.
	status, _, body := do(t, http.MethodGet, base+"/v2/models/simple/generate", nil, nil)
	if status != 405 || string(body) != `{"error":"Method Not Allowed"}` {
		t.Errorf("GET: %d %s", status, body)
	}
}

// TestGenerateRestricted: generate and generate_stream are "inference".
func TestGenerateRestricted(t *testing.T) {
	restricted := map[string]Restriction{"inference": {Key: "infer-key", Value: "v"}}
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{Restricted: restricted}})
	forbidden := `{"error":"This API is restricted, expecting header 'infer-key'"}`
	for _, route := range []string{"generate", "generate_stream"} {
		url := base + "/v2/models/id_bytes/" + route
		// The restriction comes before the method check and the lookup.
		for _, c := range []struct {
			method, url string
			header      http.Header
		}{
			{http.MethodPost, url, nil},
			{http.MethodPost, url, http.Header{"Infer-Key": {"V"}}},
			{http.MethodGet, url, nil},
			{http.MethodPost, base + "/v2/models/nope/" + route, nil},
		} {
			status, _, body := do(t, c.method, c.url, c.header, strings.NewReader(`{"INPUT0":"a"}`))
			if status != 403 || string(body) != forbidden {
				t.Errorf("%s %s %v: %d %s", c.method, c.url, c.header, status, body)
			}
		}
		status, _, _ := do(t, http.MethodPost, url, http.Header{"Infer-Key": {"v"}}, strings.NewReader(`{"INPUT0":"a"}`))
		if status != 200 {
			t.Errorf("%s with header: %d", route, status)
		}
	}
}

// TestGenerateMaxInputSize: the JSON text and the cumulative decoded inputs
// are bounded by --http-max-input-size (a size equal to it is accepted).
func TestGenerateMaxInputSize(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{MaxInputSize: 100}})
	// 64 + 64 decoded bytes from less than 100 bytes of JSON.
	body := `{"INPUT0":` + "[1" + strings.Repeat(",1", 15) + `],"INPUT1":` + "[1" + strings.Repeat(",1", 15) + `]}`
	if len(body) > 100 {
		t.Fatalf("body of %d bytes", len(body))
	}
	status, _, got := post(t, base+"/v2/models/simple/generate", body)
	want := `{"error":"request size of 64 bytes with input 'INPUT1' of size 64 bytes exceeds the maximum allowed input size of 100. Use --http-max-input-size to increase the limit."}`
	if status != 400 || string(got) != want {
		t.Errorf("inputs: %d %s", status, got)
	}
	big := `{"INPUT0":"` + strings.Repeat("a", 90) + `"}`
	status, _, got = post(t, base+"/v2/models/id_bytes/generate_stream", big)
	want = `{"error":"request JSON size of 103 bytes exceeds the maximum allowed input size of 100 bytes. Use --http-max-input-size to increase the limit."}`
	if status != 400 || string(got) != want {
		t.Errorf("JSON: %d %s", status, got)
	}
	// JSON text of exactly the limit is accepted.
	exact := `{"INPUT0":"` + strings.Repeat("a", 87) + `"}`
	if len(exact) != 100 {
		t.Fatalf("exact body of %d bytes", len(exact))
	}
	status, _, got = post(t, base+"/v2/models/id_bytes/generate", exact)
	if status != 200 {
		t.Errorf("at the limit: %d %s", status, got)
	}
}

func TestGenerateShape(t *testing.T) {
	for _, c := range []struct {
		dims     []int64
		batching bool
		e        int64
		want     string
	}{
		{[]int64{16}, true, 16, "[1 16]"},
		{[]int64{16}, true, 32, "[2 16]"},
		{[]int64{16}, false, 16, "[16]"},
		{[]int64{16}, false, 32, "fail"},
		{[]int64{16}, true, 15, "fail"},
		{[]int64{-1}, true, 3, "[1 3]"},
		{[]int64{-1}, true, 0, "[1 0]"},
		{[]int64{-1, 2}, false, 6, "[3 2]"},
		{[]int64{2, -1, -1}, false, 6, "[2 1 3]"},
		{[]int64{1}, false, 0, "fail"},
		{[]int64{0, -1}, false, 0, "[0 1]"},
		{[]int64{0}, false, 1, "fail"},
		{[]int64{1 << 62, 1 << 62}, false, 4, "fail"},
	} {
		shape, ok := generateShape(c.dims, c.batching, c.e)
		got := "fail"
		if ok {
			got = sprintShape(shape)
		}
		if got != c.want {
			t.Errorf("%v batching=%v e=%d: %s, want %s", c.dims, c.batching, c.e, got, c.want)
		}
	}
}

func sprintShape(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// fuzzGenerateConfig has one input of most kinds.
var fuzzGenerateConfig = &modelconfig.ModelConfig{
	MaxBatchSize: 8,
	Input: []*modelconfig.ModelInput{
		{Name: "INT", DataType: modelconfig.DataType_TYPE_INT32, Dims: []int64{4}},
		{Name: "TEXT", DataType: modelconfig.DataType_TYPE_STRING, Dims: []int64{1}},
		{Name: "FLOAT", DataType: modelconfig.DataType_TYPE_FP32, Dims: []int64{-1, 2}},
		{Name: "BOOL", DataType: modelconfig.DataType_TYPE_BOOL, Dims: []int64{-1}},
		{Name: "HALF", DataType: modelconfig.DataType_TYPE_FP16, Dims: []int64{-1}},
		{Name: "U64", DataType: modelconfig.DataType_TYPE_UINT64, Dims: []int64{-1}},
	},
}

// FuzzGenerateBody: decodeGenerate never panics, fails only with classified
// errors, and every tensor it returns matches its shape.
func FuzzGenerateBody(f *testing.F) {
	for _, s := range []string{
		`{"INT":[1,2,3,4],"TEXT":"hi"}`, `{"id":"x","TEXT":["a"],"parameters":{"k":1,"b":true}}`,
		`{"FLOAT":[1,2,3,4.5],"BOOL":[true,false],"U64":18446744073709551615}`, `{"HALF":[1]}`,
		`{"INT":[[1,2],[3,4]]}`, `{"FLOAT":[]}`, `[1]`, `{"parameters":[]}`, `{"x":null}`, `{"INT":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeGenerate(body, fuzzGenerateConfig, 1<<16)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Msg == "" {
				t.Fatalf("error %v is not a *core.Error", err)
			}
			return
		}
		var total int
		for _, in := range req.Inputs {
			n := core.ElementCount(in.Shape)
			total += len(in.Data)
			if in.DataType == core.TypeBytes {
				if got := core.CountBytesElements(in.Data); got != n {
					t.Fatalf("%s: %d strings for shape %v", in.Name, got, in.Shape)
				}
				continue
			}
			if int64(len(in.Data)) != n*int64(in.DataType.ByteSize()) {
				t.Fatalf("%s: %d bytes for shape %v", in.Name, len(in.Data), in.Shape)
			}
		}
		if total > 1<<16 {
			t.Fatalf("%d input bytes over the limit", total)
		}
	})
}

// TestGenerateStreamDecoupled streams a decoupled model's 0, 1 and 1,000
// responses as SSE events (triton-inference-server/server
// docs/protocol/extension_generate.md); a final flag alone sends
// nothing; an error after responses is an error event under status 200,
// and as the first response it sets the status. /generate answers 0 or
// several responses with Triton's error object (GenerateRequestClass in
// triton-inference-server/server src/http_server.cc).
func TestGenerateStreamDecoupled(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, map[string]testModel{"repeat": {config: servertest.RepeatConfig, onnx: []byte("repeat")}}), serverOpts{})
	url := base + "/v2/models/repeat/generate_stream"
	for _, n := range []int{0, 1, 1000} {
		status, h, body := post(t, url, `{"IN":[`+strings.Trim(strings.Repeat("5,", n), ",")+`]}`)
		if n == 0 {
			status, h, body = post(t, url, `{"IN":[]}`)
		}
		if status != 200 || h.Get("Content-Type") != sseContentType {
			t.Fatalf("n=%d: %d %q %s", n, status, h.Get("Content-Type"), body)
		}
		events := strings.SplitAfter(string(body), "\n\n")
		events = events[:len(events)-1] // the empty tail after the last event
		if len(events) != n || len(body) > 0 && !strings.HasSuffix(string(body), "\n\n") {
			t.Fatalf("n=%d: %d events", n, len(events))
		}
		for i, e := range events {
			if want := `data: {"IDX":` + strconv.Itoa(i) + `,"OUT":5,"model_name":"repeat","model_version":"1"}` + "\n\n"; e != want {
				t.Fatalf("n=%d event %d: %q, want %q", n, i, e, want)
			}
		}
	}
	status, _, body := post(t, url, `{"IN":[1,2,3],"fail_at":2}`)
	want := `data: {"IDX":0,"OUT":1,"model_name":"repeat","model_version":"1"}` + "\n\n" +
		`data: {"IDX":1,"OUT":2,"model_name":"repeat","model_version":"1"}` + "\n\n" +
		`data: {"error":"repeat: failing at response 2"}` + "\n\n"
	if status != 200 || string(body) != want {
		t.Fatalf("failing stream: %d %q", status, body)
	}
	status, h, body := post(t, url, `{"IN":[1],"fail_at":0}`)
	if status != 500 || h.Get("Content-Type") != sseContentType || string(body) != `data: {"error":"repeat: failing at response 0"}`+"\n\n" {
		t.Fatalf("first response an error: %d %q %q", status, h.Get("Content-Type"), body)
	}
	const notOne = `{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}`
	for _, in := range []string{`[]`, `[1,2]`} {
		if status, _, body := post(t, base+"/v2/models/repeat/generate", `{"IN":`+in+`}`); status != 200 || string(body) != notOne {
			t.Fatalf("/generate of %s: %d %s", in, status, body)
		}
	}
	if status, _, body := post(t, base+"/v2/models/repeat/generate", `{"IN":[4]}`); status != 200 || string(body) != `{"IDX":0,"OUT":4,"model_name":"repeat","model_version":"1"}` {
		t.Fatalf("/generate of one response: %d %s", status, body)
	}
}

// TestGenerateStreamCancel: a client that goes away mid-stream ends the
// request as cancelled, and the model stops producing.
func TestGenerateStreamCancel(t *testing.T) {
	base, srv := startServer(t, writeRepo(t, map[string]testModel{"repeat": {config: servertest.RepeatConfig, onnx: []byte("repeat")}}), serverOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v2/models/repeat/generate_stream",
		strings.NewReader(`{"IN":[`+strings.Trim(strings.Repeat("1,", 100000), ",")+`],"wait_us":100}`))
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	buf := make([]byte, 4096)
	if _, err := io.ReadAtLeast(resp.Body, buf, 200); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	servertest.WaitCancelled(t, srv, "repeat", 10*time.Second)
}
