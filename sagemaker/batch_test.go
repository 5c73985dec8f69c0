package sagemaker

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/inferd/inferd/platforms/httpapi"
)

// batchingConfig is a batching model with two instances and a dynamic
// batcher.
const batchingConfig = `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
dynamic_batching { }
`

// nonBatchingConfig is a model without batching.
const nonBatchingConfig = `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_CPU count: 3 } ]
`

func TestExecutionParameters(t *testing.T) {
	root := smeRepo(t)
	writeModel(t, filepath.Join(root, "dyn"), batchingConfig, idONNX)
	writeModel(t, filepath.Join(root, "plain"), nonBatchingConfig, idONNX)
	startup := []string{"simple", "dyn", "plain"}
	cpus := runtime.NumCPU()
	cases := []struct {
		name string
		api  httpapi.Options
		sm   Options
		want executionParameters
	}{
		// Derived: one instance, batching, the 64 MiB default body limit.
		{"batching model", httpapi.Options{}, Options{DefaultModel: "simple"}, executionParameters{1, MultiRecord, 64}},
		// Two instances, doubled under dynamic batching.
		{"dynamic batching", httpapi.Options{}, Options{DefaultModel: "dyn"}, executionParameters{4, MultiRecord, 64}},
		{"no batching", httpapi.Options{}, Options{DefaultModel: "plain"}, executionParameters{3, SingleRecord, 64}},
		// No model loaded under the name: the machine's CPUs.
		{"unknown model", httpapi.Options{}, Options{DefaultModel: "nope"}, executionParameters{cpus, SingleRecord, 64}},
		// The body limit (--http-max-input-size) bounds MaxPayloadInMB,
		// within the 100 MB a job allows.
		{"small limit", httpapi.Options{MaxInputSize: 8 << 20}, Options{DefaultModel: "simple"}, executionParameters{1, MultiRecord, 8}},
		{"large limit", httpapi.Options{MaxInputSize: 1 << 30}, Options{DefaultModel: "simple"}, executionParameters{1, MultiRecord, 100}},
		// The job's settings (SAGEMAKER_* env) win.
		{"job settings", httpapi.Options{}, Options{DefaultModel: "dyn",
			Batch: BatchOptions{Transform: true, MaxPayloadInMB: 6, BatchStrategy: SingleRecord, MaxConcurrentTransforms: 7}},
			executionParameters{7, SingleRecord, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, setup{repo: root, startup: startup, api: c.api, sm: c.sm})
			r := e.do(t, http.MethodGet, "/execution-parameters", nil, "")
			if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %q (%s)", r.status, r.body, r.header.Get("Content-Type"))
			}
			var got executionParameters
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatalf("reply %q: %v", r.body, err)
			}
			if got != c.want {
				t.Errorf("got %+v (%s), want %+v", got, r.body, c.want)
			}
		})
	}
	e := start(t, setup{repo: root, startup: startup})
	e.do(t, http.MethodPost, "/execution-parameters", nil, "").expect(t, "POST", 405, `{"error":"Method Not Allowed"}`)
}

func TestBatchFromEnv(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want BatchOptions
	}{
		{nil, BatchOptions{}},
		{map[string]string{"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "20", "SAGEMAKER_BATCH_STRATEGY": "MULTI_RECORD",
			"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "4"}, BatchOptions{true, 20, MultiRecord, 4}},
		{map[string]string{"SAGEMAKER_BATCH": "True", "SAGEMAKER_BATCH_STRATEGY": "single_record"}, BatchOptions{Transform: true, BatchStrategy: SingleRecord}},
		// Values the job could not have sent are left to the container.
		{map[string]string{"SAGEMAKER_MAX_PAYLOAD_IN_MB": "six", "SAGEMAKER_BATCH_STRATEGY": "SOME", "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "-1"}, BatchOptions{}},
	}
	for _, c := range cases {
		if got := batchFromEnv(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: got %+v, want %+v", c.env, got, c.want)
		}
	}
}
