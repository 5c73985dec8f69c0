package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// newV2Server starts the core with ONNX Runtime on a one-model repository
// (id1: FP32 identity, dims [-1], and ens1, an ensemble of it) and returns
// the real v2 API handler.
func newV2Server(t *testing.T) *httpapi.Server {
	t.Helper()
	root := servertest.WriteRepo(t, map[string]servertest.Model{"id1": {
		Config: `max_batch_size: 8
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`,
		ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1)),
	},
		// ens1: an ensemble of the one step id1.
		"ens1": servertest.Ensemble(servertest.EnsembleConfig("ens1", 8, []string{"INPUT0:TYPE_FP32:[ -1 ]"}, []string{"OUTPUT0:TYPE_FP32:[ -1 ]"},
			servertest.Step{Model: "id1", In: []string{"INPUT0=INPUT0"}, Out: []string{"OUTPUT0=OUTPUT0"}})),
	})
	api := httpapi.New(servertest.Start(t, servertest.Options{Repo: root}), httpapi.Options{})
	return api
}

type inferResponse struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	Outputs      []struct {
		Name       string         `json:"name"`
		Datatype   string         `json:"datatype"`
		Shape      []int          `json:"shape"`
		Data       []float32      `json:"data"`
		Parameters map[string]int `json:"parameters"`
	} `json:"outputs"`
}

// TestV2Server runs v2 requests through the real inferd API server.
func TestV2Server(t *testing.T) {
	a := newTestHandler(newV2Server(t), Options{})
	const jsonInfer = `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],"data":[1.5,2,-3]}]}`

	// Binary request: JSON header then 3 little-endian FP32 values, asking
	// for a binary output; the body travels base64 both ways.
	header := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":12}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
	binBody := []byte(header)
	for _, f := range []float32{4, 5, 6} {
		binBody = binary.LittleEndian.AppendUint32(binBody, math.Float32bits(f))
	}
	binURL := urlEvent("POST", "/v2/models/id1/infer", "", base64.StdEncoding.EncodeToString(binBody), true)
	binURL.Headers["content-type"] = "application/octet-stream"
	binURL.Headers["inference-header-content-length"] = strconv.Itoa(len(header))

	checkJSON := func(t *testing.T, r result) {
		t.Helper()
		var got inferResponse
		if r.status != 200 || r.b64 || json.Unmarshal(r.body, &got) != nil {
			t.Fatalf("got %d b64=%v %s", r.status, r.b64, r.body)
		}
		if got.ModelName != "id1" || got.ModelVersion != "1" || len(got.Outputs) != 1 || got.Outputs[0].Name != "OUTPUT0" ||
			len(got.Outputs[0].Data) != 3 || got.Outputs[0].Data[0] != 1.5 || got.Outputs[0].Data[2] != -3 {
			t.Fatalf("got %s", r.body)
		}
	}
	cases := []struct {
		name    string
		payload json.RawMessage
		check   func(t *testing.T, r result)
	}{
		{"function URL v2 infer", mustJSON(t, urlEvent("POST", "/v2/models/id1/infer", "", jsonInfer, false)), checkJSON},
		{"REST v1 infer with a stage", mustJSON(t, restEvent("POST", "prod", "/v2/models/id1/infer", "/prod/v2/models/id1/infer", jsonInfer, false)), checkJSON},
		{"HTTP API infer with a named stage", mustJSON(t, httpAPIEvent("POST", "prod", "/prod/v2/models/id1/infer", "", jsonInfer, false)), checkJSON},
		{"ALB infer", mustJSON(t, albEvent("POST", "/v2/models/id1/infer", false, jsonInfer, false)), checkJSON},
		{"function URL binary tensors", mustJSON(t, binURL), func(t *testing.T, r result) {
			n, err := strconv.Atoi(r.headers["Inference-Header-Content-Length"])
			if r.status != 200 || !r.b64 || r.headers["Content-Type"] != "application/octet-stream" || err != nil || n > len(r.body) {
				t.Fatalf("got %d %v b64=%v %q", r.status, r.headers, r.b64, r.body)
			}
			var got inferResponse
			if err := json.Unmarshal(r.body[:n], &got); err != nil || got.Outputs[0].Parameters["binary_data_size"] != 12 {
				t.Fatalf("header %s: %v", r.body[:n], err)
			}
			if !bytes.Equal(r.body[n:], binBody[len(header):]) {
				t.Fatalf("tensor bytes %v", r.body[n:])
			}
		}},
		{"function URL ensemble infer", mustJSON(t, urlEvent("POST", "/v2/models/ens1/infer", "", jsonInfer, false)), func(t *testing.T, r result) {
			var got inferResponse
			if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.ModelName != "ens1" || len(got.Outputs) != 1 || got.Outputs[0].Data[2] != -3 {
				t.Fatalf("got %d %s", r.status, r.body)
			}
		}},
		{"health through a stage", mustJSON(t, httpAPIEvent("GET", "prod", "/prod/v2/health/ready", "", "", false)), func(t *testing.T, r result) {
			if r.status != 200 || len(r.body) != 0 {
				t.Fatalf("got %d %q", r.status, r.body)
			}
		}},
		{"unknown path is the local server's 404", mustJSON(t, urlEvent("GET", "/invocations", "", "", false)), func(t *testing.T, r result) {
			if r.status != 404 || string(r.body) != `{"error":"Not Found"}` {
				t.Fatalf("got %d %q", r.status, r.body)
			}
		}},
		{"unknown model", mustJSON(t, urlEvent("POST", "/v2/models/nope/infer", "", jsonInfer, false)), func(t *testing.T, r result) {
			if r.status != 404 || r.errorText(t) == "" {
				t.Fatalf("got %d %q", r.status, r.body)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Invoke(context.Background(), tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, decodeResult(t, res))
		})
	}
}
