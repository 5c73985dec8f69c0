package sagemaker

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/platforms/httpapi"
)

// fixedConfig is an identity model with one fixed-shape input and a
// batch of at most 2, so that csv rows go in several requests.
const fixedConfig = `platform: "onnxruntime_onnx"
max_batch_size: 2
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

var fixedONNX = onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 3))

// recordsRepo holds simple (two INT32 [16] inputs), id1 (FP32 [-1]) and
// fixed (FP32 [3]).
func recordsRepo(t testing.TB) string {
	root := smeRepo(t)
	writeModel(t, filepath.Join(root, "fixed"), fixedConfig, fixedONNX)
	return root
}

// TestJSONLines sends application/jsonlines bodies as boto3's
// invoke_endpoint(ContentType="application/jsonlines", Body=...) and a
// transform job's MULTI_RECORD mini-batches do.
func TestJSONLines(t *testing.T) {
	root := recordsRepo(t)
	startup := []string{"simple", "id1", "fixed"}
	simple := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "simple"}})
	id := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "id1"}})
	restricted := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "simple"},
		api: httpapi.Options{Restricted: map[string]httpapi.Restriction{"inference": {Key: "X-Auth", Value: "secret"}}}})
	ct := map[string]string{"Content-Type": "application/jsonlines"}

	simpleReply := `{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":` +
		sums(1, 2) + `},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":` + constant(16, -1) + `}]}`
	// Two instances of simple as objects of input name to value.
	instances := `{"instances":[{"INPUT0":` + ints(16, 0) + `,"INPUT1":` + ints(16, 1) + `},{"INPUT0":` + ints(16, 1) + `,"INPUT1":` + ints(16, 0) + `}]}`
	instancesReply := `{"predictions":[{"OUTPUT0":` + sums(1, 2) + `,"OUTPUT1":` + constant(16, -1) + `},{"OUTPUT0":` + sums(1, 2) + `,"OUTPUT1":` + constant(16, 1) + `}]}`
	cases := []struct {
		name   string
		e      *env
		header map[string]string
		body   string
		status int
		want   string // reply body, or the error's text
	}{
		{"v2 lines", simple, ct, simpleJSON + "\n" + simpleJSON + "\n", 200, simpleReply + "\n" + simpleReply + "\n"},
		// Blank lines and CRLF are skipped; the charset parameter is fine.
		{"crlf and blanks", simple, map[string]string{"Content-Type": "application/jsonlines; charset=utf-8"}, "\r\n" + simpleJSON + "\r\n\r\n", 200, simpleReply + "\n"},
		{"instances objects", simple, ct, instances, 200, instancesReply + "\n"},
		// A single-input model takes the values themselves, nested by shape.
		{"instances values", id, ct, `{"instances":[[1.5,2],[3,4]]}` + "\n" + `{"instances":[[5]]}`, 200,
			`{"predictions":[[1.5,2.0],[3.0,4.0]]}` + "\n" + `{"predictions":[[5.0]]}` + "\n"},
		// A record's members that name no input are ignored.
		{"instances extra field", id, ct, `{"instances":[{"INPUT0":[1,2],"id":"a"}]}`, 200, `{"predictions":[[1.0,2.0]]}` + "\n"},
		// Lines answered in order even though they run at once.
		{"many lines", id, ct, strings.Repeat(`{"instances":[[1]]}`+"\n", 5) + `{"instances":[[2]]}`, 200,
			strings.Repeat(`{"predictions":[[1.0]]}`+"\n", 5) + `{"predictions":[[2.0]]}` + "\n"},
		// Errors name the line (1-based, blank lines counted).
		{"bad json", simple, ct, simpleJSON + "\n\n{oops\n", 400, "line 3: not a JSON object"},
		{"inference error", simple, ct, simpleJSON + "\n" + `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":` + ints(16, 0) + `}]}`, 400,
			"line 2: [request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'"},
		{"missing input", simple, ct, `{"instances":[{"INPUT0":` + ints(16, 0) + `}]}`, 400, "line 1: instance 0: missing input 'INPUT1'"},
		{"ragged instances", id, ct, `{"instances":[[1,2],[3]]}`, 400, "line 1: instance 1: input 'INPUT0' has shape [1], instance 0 has [2]"},
		{"empty instances", id, ct, `{"instances":[]}`, 400, `line 1: \"instances\" must be a non-empty array`},
		{"binary output", simple, ct, `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":` + ints(16, 0) +
			`},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":` + ints(16, 1) + `}],"parameters":{"binary_data_output":true}}`, 400,
			"line 1: binary outputs cannot be returned as application/jsonlines"},
		{"restricted", restricted, ct, simpleJSON, 403, "This API is restricted, expecting header 'X-Auth'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.e.do(t, http.MethodPost, "/invocations", c.header, c.body)
			if c.status != 200 {
				r.expectError(t, c.name, c.status, c.want)
				return
			}
			r.expect(t, c.name, 200, c.want)
			if got := r.header.Get("Content-Type"); got != "application/jsonlines" {
				t.Errorf("Content-Type %q", got)
			}
		})
	}
}

func TestCSV(t *testing.T) {
	root := recordsRepo(t)
	startup := []string{"simple", "id1", "fixed"}
	fixed := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "fixed"}})
	simple := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "simple"}})
	id := start(t, setup{repo: root, startup: startup, sm: Options{DefaultModel: "id1"}})
	ct := map[string]string{"Content-Type": "text/csv"}
	// Five rows: three requests of at most max_batch_size 2.
	body := "1,2,3\n4,5,6\n7.5,8,9\n-1,0,1e3\n 2, 3, 4\n"

	cases := []struct {
		name   string
		e      *env
		header map[string]string
		body   string
		status int
		ctype  string
		want   string
	}{
		{"csv", fixed, ct, body, 200, "text/csv", "1.0,2.0,3.0\n4.0,5.0,6.0\n7.5,8.0,9.0\n-1.0,0.0,1000.0\n2.0,3.0,4.0\n"},
		{"no final newline", fixed, map[string]string{"Content-Type": "text/csv; charset=utf-8"}, "1,2,3", 200, "text/csv", "1.0,2.0,3.0\n"},
		{"accept jsonlines", fixed, map[string]string{"Content-Type": "text/csv", "Accept": "application/jsonlines"}, "1,2,3\n4,5,6\n", 200,
			"application/jsonlines", "[1.0,2.0,3.0]\n[4.0,5.0,6.0]\n"},
		// Errors name the row (and column).
		{"short row", fixed, ct, "1,2,3\n4,5\n", 400, "", "row 2: input 'INPUT0' of shape [3] takes 3 values, got 2"},
		{"bad value", fixed, ct, "1,2,3\n4,5,6\n7,x,9\n", 400, "", "row 3, column 2: cannot parse 'x' as FP32"},
		{"nan", fixed, ct, "1,NaN,3\n", 400, "", "row 1, column 2: cannot parse 'NaN' as FP32"},
		{"empty", fixed, ct, "", 400, "", "no rows in the text/csv body"},
		{"two inputs", simple, ct, "1,2\n", 400, "", "text/csv needs a model with one input; model 'simple' has 2"},
		{"variable shape", id, ct, "1,2\n", 400, "", "text/csv needs an input of fixed shape; input 'INPUT0' of model 'id1' has shape [-1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.e.do(t, http.MethodPost, "/invocations", c.header, c.body)
			if c.status != 200 {
				r.expectError(t, c.name, c.status, c.want)
				return
			}
			r.expect(t, c.name, 200, c.want)
			if got := r.header.Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
		})
	}
}

// TestRecordsUnknownModel: the default model's errors, as /invocations
// answers them for JSON.
func TestRecordsUnknownModel(t *testing.T) {
	e := start(t, setup{repo: recordsRepo(t), startup: []string{"simple"}, sm: Options{DefaultModel: "nope"}})
	for _, ct := range []string{"text/csv", "application/jsonlines"} {
		e.do(t, http.MethodPost, "/invocations", map[string]string{"Content-Type": ct}, "1\n").
			expectError(t, ct, 404, "Request for unknown model: 'nope' is not found")
	}
}
