package modelconfig

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
		check   func(t *testing.T, cfg *ModelConfig)
	}{
		{
			name: "list syntax, capitalised bool, numeric enum, comments",
			text: `
# comment
name: "m"  # trailing comment
backend: "onnxruntime"
max_batch_size: 8
input [
  { name: "a" data_type: 11 dims: [ 16 ] },
  { name: "b", data_type: TYPE_INT64, dims: [ -1, 2 ] }
]
output: [ { name: "c" data_type: TYPE_FP32 dims: 16 dims: 4 } ]
instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R" global: True count: 2 } ] } } ]
dynamic_batching: { }
`,
			check: func(t *testing.T, cfg *ModelConfig) {
				if got := cfg.Input[0].DataType; got != DataType_TYPE_FP32 {
					t.Errorf("data_type: 11 parsed as %v", got)
				}
				if got := cfg.Input[0].Dims; len(got) != 1 || got[0] != 16 {
					t.Errorf("dims: [ 16 ] parsed as %v", got)
				}
				if got := cfg.Output[0].Dims; len(got) != 2 || got[0] != 16 || got[1] != 4 {
					t.Errorf("repeated scalar occurrences parsed as %v", got)
				}
				if !cfg.InstanceGroup[0].RateLimiter.Resources[0].Global {
					t.Error("global: True not parsed as true")
				}
				if cfg.GetDynamicBatching() == nil {
					t.Error("empty dynamic_batching {} must enable dynamic batching")
				}
			},
		},
		{
			name: "bool spellings",
			text: `name: "m" input [ { name: "a" optional: t allow_ragged_batch: 1 is_shape_tensor: False } ]`,
			check: func(t *testing.T, cfg *ModelConfig) {
				in := cfg.Input[0]
				if !in.Optional || !in.AllowRaggedBatch || in.IsShapeTensor {
					t.Errorf("bools parsed wrong: %v", in)
				}
			},
		},
		{
			name: "maps as repeated key/value entries",
			text: `name: "m"
parameters { key: "intra_op_thread_count" value: { string_value: "4" } }
parameters: { key: "execution_mode" value { string_value: "1" } }
cc_model_filenames [ { key: "8.0" value: "a.onnx" }, { key: "9.0" value: "b.onnx" } ]`,
			check: func(t *testing.T, cfg *ModelConfig) {
				if v, ok := StringParameter(cfg, "intra_op_thread_count"); !ok || v != "4" {
					t.Errorf("parameters = %v", cfg.Parameters)
				}
				if len(cfg.CcModelFilenames) != 2 {
					t.Errorf("cc_model_filenames = %v", cfg.CcModelFilenames)
				}
			},
		},
		{
			name: "presence of empty reshape is kept",
			text: `name: "m" max_batch_size: 4 input [ { name: "a" data_type: TYPE_FP32 dims: [1] reshape: { shape: [] } } ]`,
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.Input[0].Reshape == nil {
					t.Error("reshape { shape: [] } lost its presence")
				}
			},
		},
		{
			name: "every nested Triton field parses",
			text: string(readTestdata(t, "golden/dynamic_priority.pbtxt")) + `
model_operations { op_library_filename: [ "libcustom.so" ] }
model_repository_agents { agents [ { name: "checksum" parameters { key: "MD5:1/model.onnx" value: "abc" } } ] }
runtime: "libtriton_onnxruntime.so"
batch_output [ { target_name: [ "Y" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: [ "X" ] } ]`,
		},
		{
			name: "sequence batching with direct strategy, state and initial_state",
			text: `name: "m" sequence_batching {
  direct { max_queue_delay_microseconds: 10 minimum_slot_utilization: 0.5 }
  control_input [ { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] } ]
  state [ { input_name: "i" output_name: "o" data_type: TYPE_FP32 dims: [ 2 ]
            initial_state [ { data_type: TYPE_FP32 dims: [ 2 ] data_file: "init.bin" name: "f" } ]
            use_same_buffer_for_input_output: true use_growable_memory: true } ]
  iterative_sequence: true
}`,
		},
		{
			name: "ensemble with max_inflight_requests",
			text: `name: "e" platform: "ensemble" ensemble_scheduling { max_inflight_requests: 8 step [ { model_name: "a" model_version: -1 model_namespace: "" } ] }`,
			check: func(t *testing.T, cfg *ModelConfig) {
				if cfg.GetEnsembleScheduling().GetMaxInflightRequests() != 8 {
					t.Error("max_inflight_requests not parsed")
				}
			},
		},
		{name: "unknown field", text: `name: "m" no_such_field: 1`, wantErr: "no_such_field"},
		{name: "unknown nested field", text: `name: "m" input [ { name: "a" shape: [1] } ]`, wantErr: "shape"},
		{name: "two members of the scheduling oneof", text: `name: "m" dynamic_batching {} sequence_batching {}`, wantErr: "parse model config text"},
		{name: "two members of the version policy oneof", text: `version_policy { latest {} all {} }`, wantErr: "parse model config text"},
		{name: "singular field repeated", text: `name: "a" name: "b"`, wantErr: "parse model config text"},
		{name: "unknown enum name", text: `input [ { data_type: TYPE_FLOAT } ]`, wantErr: "TYPE_FLOAT"},
		{name: "syntax error", text: `name: "m" input [ { name: "a" `, wantErr: "parse model config text"},
		{name: "old field name max_inflight_responses", text: `ensemble_scheduling { max_inflight_responses: 1 }`, wantErr: "max_inflight_responses"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.text))
			wantErr(t, err, tc.wantErr)
			if err == nil && tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		wantErr string
		want    *ModelConfig
	}{
		{
			name: "int64 as numbers and strings, proto and camel names",
			json: `{"name":"m","max_batch_size":4,"input":[{"name":"a","data_type":"TYPE_FP32","dims":[16,"-1"]}],
				"dynamicBatching":{"maxQueueDelayMicroseconds":"100","priority_levels":2}}`,
			want: &ModelConfig{
				Name:         "m",
				MaxBatchSize: 4,
				Input:        []*ModelInput{{Name: "a", DataType: DataType_TYPE_FP32, Dims: []int64{16, -1}}},
				SchedulingChoice: &ModelConfig_DynamicBatching{DynamicBatching: &ModelDynamicBatching{
					MaxQueueDelayMicroseconds: 100, PriorityLevels: 2,
				}},
			},
		},
		{
			name: "enum names in any case, nested in lists and maps",
			json: `{"input":[{"data_type":"type_fp32","format":"Format_NCHW"}],
				"instance_group":[{"kind":"kind_cpu"}],
				"dynamic_batching":{"priority_queue_policy":{"1":{"timeout_action":"delay"}}}}`,
			want: &ModelConfig{
				Input:         []*ModelInput{{DataType: DataType_TYPE_FP32, Format: ModelInput_FORMAT_NCHW}},
				InstanceGroup: []*ModelInstanceGroup{{Kind: ModelInstanceGroup_KIND_CPU}},
				SchedulingChoice: &ModelConfig_DynamicBatching{DynamicBatching: &ModelDynamicBatching{
					PriorityQueuePolicy: map[uint64]*ModelQueuePolicy{1: {TimeoutAction: ModelQueuePolicy_DELAY}},
				}},
			},
		},
		{name: "unknown field", json: `{"name":"m","bogus":1}`, wantErr: "bogus"},
		{name: "unknown enum value", json: `{"input":[{"data_type":"TYPE_NOPE"}]}`, wantErr: "TYPE_NOPE"},
		{name: "not JSON", json: `name: "m"`, wantErr: "parse model config JSON"},
		{name: "two oneof members", json: `{"dynamic_batching":{},"sequence_batching":{}}`, wantErr: "parse model config JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseJSON([]byte(tc.json))
			wantErr(t, err, tc.wantErr)
			if tc.want != nil && !proto.Equal(cfg, tc.want) {
				t.Fatalf("got %v\nwant %v", cfg, tc.want)
			}
		})
	}
}
