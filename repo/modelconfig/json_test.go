package modelconfig

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// normalizedFromGolden parses testdata/golden/<name>.pbtxt and runs the
// full server-side normalisation, giving what the config endpoint serves.
func normalizedFromGolden(t *testing.T, name string, gpus []int32) *ModelConfig {
	t.Helper()
	cfg := mustParse(t, string(readTestdata(t, "golden/"+name+".pbtxt")))
	if err := Normalize(cfg, name, false); err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	if err := Validate(cfg, name, true); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := NormalizeInstanceGroups(cfg, gpus); err != nil {
		t.Fatalf("NormalizeInstanceGroups: %v", err)
	}
	return cfg
}

var goldenCases = []struct {
	name string
	gpus []int32
}{
	{"simple", nil},
	{"densenet_onnx", nil},
	{"dynamic_priority", []int32{0, 1}},
	{"ensemble", nil},
	{"sequence_state", []int32{0}},
}

func TestMarshalJSONGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := normalizedFromGolden(t, tc.name, tc.gpus)
			got, err := MarshalJSON(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			checkGolden(t, "golden/"+tc.name+".json", got)

			// Stable across calls despite protojson's white-space jitter.
			for range 5 {
				again, err := MarshalJSON(cfg)
				if err != nil || !bytes.Equal(again, got) {
					t.Fatalf("output not deterministic:\n%s\n%s", got, again)
				}
			}

			// The rendered JSON is accepted back as a load override and
			// means the same configuration.
			back, err := ParseJSON(got)
			if err != nil {
				t.Fatalf("ParseJSON(MarshalJSON): %v", err)
			}
			if !proto.Equal(back, cfg) {
				t.Fatalf("round trip changed the config:\n got %v\nwant %v", back, cfg)
			}
		})
	}
}

func TestMarshalJSONShape(t *testing.T) {
	cfgs := map[string]*ModelConfig{}
	for _, tc := range goldenCases {
		cfgs[tc.name] = normalizedFromGolden(t, tc.name, tc.gpus)
	}
	render := func(t *testing.T, name string) string {
		t.Helper()
		b, err := MarshalJSON(cfgs[name])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	tests := []struct {
		name     string
		model    string
		contains []string
		absent   []string
	}{
		{
			name:  "numbers, enums, defaults, compact",
			model: "simple",
			contains: []string{
				`{"name":"simple","platform":"onnxruntime_onnx","backend":"onnxruntime","runtime":"",`,
				`"version_policy":{"latest":{"num_versions":1}}`,
				`"max_batch_size":8`,
				`"dims":[16]`,
				`"data_type":"TYPE_INT32"`,
				`"format":"FORMAT_NONE"`,
				`"is_shape_tensor":false`,
				`"batch_input":[]`,
				`"cc_model_filenames":{}`,
				`"kind":"KIND_CPU"`,
				`"count":2`,
				`"gpus":[]`,
				`"input_pinned_memory":{"enable":true}`,
				`"model_warmup":[]`,
			},
			absent: []string{"null", " ", "\n", `"reshape"`, `"response_cache"`, `"dynamic_batching"`},
		},
		{
			name:     "reshape shape converted",
			model:    "densenet_onnx",
			contains: []string{`"reshape":{"shape":[1,3,224,224]}`, `"max_batch_size":0`, `"label_filename":"densenet_labels.txt"`},
		},
		{
			name:  "dynamic batching numbers and kept strings",
			model: "dynamic_priority",
			contains: []string{
				`"version_policy":{"specific":{"versions":[1,3]}}`,
				`"dims":[-1,4]`,
				`"max_queue_delay_microseconds":100`,
				`"priority_levels":2`,
				`"default_priority_level":2`,
				`"default_timeout_microseconds":1000`,
				`"priority_queue_policy":{"1":{"timeout_action":"REJECT","default_timeout_microseconds":500,`,
				`"timeout_action":"DELAY"`,
				// Triton leaves these 64-bit fields as strings.
				`"secondary_devices":[{"kind":"KIND_NVDLA","device_id":"7"}]`,
				`"input":{"X":{"dim":["2","4"]}}`,
				`"graph_lower_bound":{"batch_size":1,"input":{"X":{"dim":["1","4"]}}}`,
				// Warmup dims are converted.
				`"inputs":{"X":{"data_type":"TYPE_FP32","dims":[3,4],"zero_data":true}}`,
				`"buckets":[1,2.5,10]`,
				`"response_cache":{"enable":true}`,
				`"name":"gpus","kind":"KIND_GPU","count":2,`,
				`"gpus":[0,1]`,
			},
			absent: []string{"null"},
		},
		{
			name:  "ensemble keeps backend empty and has no optimization",
			model: "ensemble",
			contains: []string{
				`"platform":"ensemble","backend":"",`,
				`"model_version":-1`,
				`"model_version":3`,
				`"input_map":{"IN":"RAW"}`,
				`"max_inflight_requests":0`,
				`"instance_group":[]`,
			},
			absent: []string{`"optimization"`, "null"},
		},
		{
			name:  "sequence batching numbers and initial_state strings",
			model: "sequence_state",
			contains: []string{
				`"max_sequence_idle_microseconds":1000000`,
				`"max_queue_delay_microseconds":50`,
				`"preferred_batch_size":[2]`,
				`"fp32_false_true":[0,1]`,
				`"dims":[-1],"initial_state":[{"data_type":"TYPE_INT32","dims":["1"],"zero_data":true,"name":"init"}]`,
				`"data_type":"TYPE_UINT64"`,
			},
			absent: []string{"null"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, tc.model)
			for _, s := range tc.contains {
				if !strings.Contains(got, s) {
					t.Errorf("missing %s\nin %s", s, got)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(got, s) {
					t.Errorf("unexpected %q\nin %s", s, got)
				}
			}
		})
	}
}

func TestMarshalJSONEmptyConfig(t *testing.T) {
	got, err := MarshalJSON(&ModelConfig{})
	if err != nil || len(got) != 0 {
		t.Fatalf("MarshalJSON(empty) = %q, %v; want empty body", got, err)
	}
}

func TestMarshalJSONUint64Max(t *testing.T) {
	cfg := mustParse(t, `name: "m" backend: "onnxruntime" max_batch_size: 1
dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }`)
	got, err := MarshalJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"max_queue_delay_microseconds":18446744073709551615`) {
		t.Fatalf("uint64 max not rendered as a number: %s", got)
	}
}

func TestMarshalJSONEscapesLikeProtojson(t *testing.T) {
	cfg := mustParse(t, `name: "a<b>&\"c\"" backend: "onnxruntime" metric_tags { key: "k" value: "é\n" }`)
	got, err := MarshalJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Name       string            `json:"name"`
		MetricTags map[string]string `json:"metric_tags"`
	}
	if err := json.Unmarshal(got, &decoded); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if decoded.Name != `a<b>&"c"` || decoded.MetricTags["k"] != "é\n" {
		t.Fatalf("strings changed: %+v", decoded)
	}
}

// TestMarshalJSONMatchesTriton compares byte for byte with a body captured
// from a real Triton server (not regenerated by -update).
func TestMarshalJSONMatchesTriton(t *testing.T) {
	cfg := mustParse(t, string(readTestdata(t, "triton_capture_densenet.pbtxt")))
	if err := Normalize(cfg, "densenet_onnx", true); err != nil {
		t.Fatal(err)
	}
	if err := NormalizeInstanceGroups(cfg, nil); err != nil {
		t.Fatal(err)
	}
	got, err := MarshalJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := readTestdata(t, "triton_capture_densenet.json")
	if !bytes.Equal(got, want) {
		t.Fatalf("differs from Triton's body\n got: %s\nwant: %s", got, want)
	}
}
