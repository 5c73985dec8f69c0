package modelconfig

import (
	"strings"
	"testing"
)

// onnx is a valid batching ONNX config that cases extend.
const onnx = `name: "m" backend: "onnxruntime" max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] } ]
`

// onnxNoIO is a valid ONNX config without tensors, for tensor-rule cases.
const onnxNoIO = `name: "m" backend: "onnxruntime" `

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		dir     string // defaults to "m"
		text    string
		noNorm  bool // validate the parsed config as is
		wantErr string
	}{
		{name: "valid", text: onnx},
		{name: "valid densenet style reshape", text: readGolden("densenet_onnx")},

		// Name and backend/platform.
		{name: "name differs from directory", dir: "other", text: onnx,
			wantErr: "unexpected directory name 'other' for model 'm', directory name must equal model name"},
		{name: "empty name without normalisation", noNorm: true, text: `backend: "onnxruntime" version_policy { all {} }`,
			wantErr: "model configuration must specify 'name'"},
		{name: "no backend", noNorm: true, text: `name: "m" platform: "foo" version_policy { all {} }`,
			wantErr: "unexpected platform type 'foo' for m"},
		{name: "ensemble with backend", text: `name: "m" platform: "ensemble" backend: "onnxruntime"`,
			wantErr: "Ensemble model 'm' must have platform type 'ensemble' and empty backend type"},
		{name: "onnx platform with tensorrt backend", text: `name: "m" platform: "onnxruntime_onnx" backend: "tensorrt"`,
			wantErr: "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, tensorrt"},
		{name: "known backend with unknown platform", text: `name: "m" platform: "foo" backend: "onnxruntime"`,
			wantErr: "unexpected 'platform' and 'backend' pair, got:foo, onnxruntime"},
		{name: "unknown backend accepts any platform", text: `name: "m" platform: "foo" backend: "mybackend"`},
		{name: "pytorch pair", text: `name: "m" platform: "pytorch_libtorch" backend: "pytorch"`},
		{name: "tensorflow pair", text: `name: "m" platform: "tensorflow_graphdef" backend: "tensorflow"`},
		{name: "missing version policy", noNorm: true, text: `name: "m" backend: "onnxruntime" platform: "onnxruntime_onnx"`,
			wantErr: "must specify 'version policy' for m"},
		{name: "negative max_batch_size", text: onnxNoIO + `max_batch_size: -1`,
			wantErr: "'max_batch_size' must be non-negative value for m"},

		// Dynamic batching.
		{name: "preferred size above max_batch_size", text: onnx + `dynamic_batching { preferred_batch_size: [ 4, 16 ] }`,
			wantErr: "dynamic batching preferred size must be <= max batch size for m"},
		{name: "preferred size zero", text: onnx + `dynamic_batching { preferred_batch_size: [ 0 ] }`,
			wantErr: "dynamic batching preferred size must be positive for m"},
		{name: "preferred size with non-batching model", text: onnxNoIO + `dynamic_batching { preferred_batch_size: [ 1 ] }`,
			wantErr: "dynamic batching preferred size must be <= max batch size for m"},
		{name: "priorities valid", text: readGolden("dynamic_priority")},
		{name: "default priority level zero", text: onnx + `dynamic_batching { priority_levels: 2 }`,
			wantErr: "default priority level must be in range [1, 2] for m"},
		{name: "default priority level too high", text: onnx + `dynamic_batching { priority_levels: 2 default_priority_level: 3 }`,
			wantErr: "default priority level must be in range [1, 2] for m"},
		{name: "priority queue policy key out of range", text: onnx +
			`dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 3 value {} } }`,
			wantErr: "priority queue policy must have priority level in range [1, 2] for m"},
		{name: "priority queue policy key zero", text: onnx +
			`dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 0 value {} } }`,
			wantErr: "priority queue policy must have priority level in range [1, 2] for m"},
		{name: "preserve_ordering with two priority levels", text: onnx +
			`dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }`,
			wantErr: "Only one priority level is allowed when 'preserve_ordering' is true for m"},
		{name: "preserve_ordering with one priority level", text: onnx +
			`dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 }`},
		{name: "preserve_ordering with DELAY default policy", text: onnx +
			`dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 } }`,
			wantErr: "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m"},
		{name: "preserve_ordering with DELAY but no timeout", text: onnx +
			`dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY } }`},
		{name: "preserve_ordering with DELAY priority policy", text: onnx +
			`dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1
			  priority_queue_policy { key: 1 value { timeout_action: DELAY default_timeout_microseconds: 5 } } }`,
			wantErr: "Queue policy can not have DELAY as timeout action"},

		// Sequence batching.
		{name: "sequence batching valid", text: readGolden("sequence_state")},
		{name: "sequence with response cache", text: onnx + `sequence_batching {} response_cache { enable: true }`,
			wantErr: "Response Cache does not currently support model m with sequence batching scheduler"},
		{name: "control input without name", text: onnx +
			`sequence_batching { control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } ] } ] }`,
			wantErr: "sequence batching control tensor must have a name for m"},
		{name: "same tensor for two controls", text: onnx +
			`sequence_batching { control_input [
			  { name: "C" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } ] },
			  { name: "C" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } ] } ] }`,
			wantErr: "sequence batching control tensor 'C' is specified for multiple control kinds for m"},
		{name: "control kind twice", text: onnx +
			`sequence_batching { control_input [
			  { name: "A" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } ] },
			  { name: "B" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } ] } ] }`,
			wantErr: "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for m"},
		{name: "start without false/true values", text: onnx +
			`sequence_batching { control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START } ] } ] }`,
			wantErr: "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for m"},
		{name: "ready with two value lists", text: onnx +
			`sequence_batching { control_input [ { name: "R" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1] fp32_false_true: [0, 1] } ] } ] }`,
			wantErr: "sequence batching specifies more than one from"},
		{name: "end with three values", text: onnx +
			`sequence_batching { control_input [ { name: "E" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [false, true, true] } ] } ] }`,
			wantErr: "sequence batching control 'bool_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_END for m"},
		{name: "corrid with values", text: onnx +
			`sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [0, 1] } ] } ] }`,
			wantErr: "sequence batching must not specify either"},
		{name: "corrid with float type", text: onnx +
			`sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ] }`,
			wantErr: "unexpected data type for control CONTROL_SEQUENCE_CORRID for m"},
		{name: "corrid string", text: onnx +
			`sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] }`},
		{name: "oldest preferred size above max", text: onnx + `sequence_batching { oldest { preferred_batch_size: [ 9 ] } }`,
			wantErr: "sequence batching preferred batch size must be <= max batch size for m"},
		{name: "oldest preferred size negative", text: onnx + `sequence_batching { oldest { preferred_batch_size: [ -1 ] } }`,
			wantErr: "sequence batching preferred batch size must be positive for m"},
		{name: "direct slot utilization above one", text: onnx + `sequence_batching { direct { minimum_slot_utilization: 1.5 } }`,
			wantErr: "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m"},
		{name: "direct slot utilization negative", text: onnx + `sequence_batching { direct { minimum_slot_utilization: -0.1 } }`,
			wantErr: "minimum slot utilization"},

		// Transaction policy, metrics.
		{name: "decoupled with response cache", text: onnx + `model_transaction_policy { decoupled: true } response_cache { enable: true }`,
			wantErr: "Response Cache does not currently support model m with 'decoupled' transaction policy"},
		{name: "decoupled without cache", text: onnx + `model_transaction_policy { decoupled: true }`},
		{name: "metric control without identifier", text: onnx + `model_metrics { metric_control [ { histogram_options { buckets: [1] } } ] }`,
			wantErr: "metric control must specify 'metric_identifier'"},
		{name: "metric control with empty family", text: onnx + `model_metrics { metric_control [ { metric_identifier {} histogram_options { buckets: [1] } } ] }`,
			wantErr: "metric identifier must specify non-empty 'family'"},
		{name: "metric control without histogram options", text: onnx + `model_metrics { metric_control [ { metric_identifier { family: "f" } } ] }`,
			wantErr: "metric control must specify 'histogram_options'"},
		{name: "metric control with empty buckets", text: onnx + `model_metrics { metric_control [ { metric_identifier { family: "f" } histogram_options {} } ] }`,
			wantErr: "histogram options must specify non-empty 'buckets'"},

		// Tensors.
		{name: "input without name", text: onnxNoIO + `input [ { data_type: TYPE_FP32 dims: [1] } ]`,
			wantErr: "model input must specify 'name' for m"},
		{name: "input without data_type", text: onnxNoIO + `input [ { name: "X" dims: [1] } ]`,
			wantErr: "model input 'X' must specify 'data_type' for m"},
		{name: "input dims empty", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [] } ]`,
			wantErr: "model input 'X' must specify 'dims' for m"},
		{name: "input dims zero", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ 0 ] } ]`,
			wantErr: "model input 'X' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m"},
		{name: "output dims -2", text: onnxNoIO + `output [ { name: "Y" data_type: TYPE_FP32 dims: [ -2 ] } ]`,
			wantErr: "model output 'Y' dimension must be integer >= 1, or -1"},
		{name: "empty reshape without batching", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]`,
			wantErr: "model input 'X' cannot have empty reshape for non-batching model as scalar tensors are not supported for m"},
		{name: "empty reshape with batching and dims [1]", text: onnxNoIO + `max_batch_size: 4 input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]`},
		{name: "empty reshape with batching and dims [2]", text: onnxNoIO + `max_batch_size: 4 input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] reshape: { shape: [ ] } } ]`,
			wantErr: "model input 'X' has different size for dims and reshape for m"},
		{name: "reshape dim zero", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 0 ] } } ]`,
			wantErr: "model input 'X' reshape dimensions must be integer >= 1, or -1"},
		{name: "reshape element count differs", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 3 ] } } ]`,
			wantErr: "model input 'X' has different size for dims and reshape"},
		{name: "reshape with matching wildcard runs", text: onnxNoIO + `output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape: { shape: [ 8, -1, 1, 6 ] } } ]`},
		{name: "reshape with mismatching wildcard runs", text: onnxNoIO + `output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape: { shape: [ 4, -1, 12 ] } } ]`,
			wantErr: "model output 'Y' has different size for dims and reshape"},
		{name: "reshape with different wildcard count", text: onnxNoIO + `output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, 2 ] reshape: { shape: [ -1, -1, 2 ] } } ]`,
			wantErr: "model output 'Y' has different number of variable-size dimensions for dims and reshape"},
		{name: "wildcard dims with fixed reshape", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] reshape: { shape: [ 4 ] } } ]`,
			wantErr: "has different size for dims and reshape"},
		{name: "NCHW needs rank 3", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224 ] } ]`,
			wantErr: "model input NHWC/NCHW require 3 dims for m"},
		{name: "shape tensor on onnx input", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_INT64 dims: [ 2 ] is_shape_tensor: true } ]`,
			wantErr: "shape tensors are only supported for TensorRT platform for m"},
		{name: "shape tensor on onnx output", text: onnxNoIO + `output [ { name: "Y" data_type: TYPE_INT64 dims: [ 2 ] is_shape_tensor: true } ]`,
			wantErr: "shape tensors are only supported for TensorRT platform"},
		{name: "shape tensor on tensorrt", text: `name: "m" backend: "tensorrt" input [ { name: "X" data_type: TYPE_INT64 dims: [ 2 ] is_shape_tensor: true } ]`},
		{name: "non-linear IO on onnx", text: onnxNoIO + `input [ { name: "X" data_type: TYPE_FP32 dims: [ 3, 4, 5 ] is_non_linear_format_io: true } ]`,
			wantErr: "Non-linear IO format is only supported for the TensorRT platform for m"},
		{name: "non-linear IO on tensorrt with rank 2", text: `name: "m" backend: "tensorrt" output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3, 4 ] is_non_linear_format_io: true } ]`,
			wantErr: "Non-linear IO format output requires 3 dims"},

		// Batch inputs and outputs.
		{name: "batch input valid", text: onnx + `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "IN" } ]`},
		{name: "batch input two sources", text: onnx + `batch_input [ { kind: BATCH_ITEM_SHAPE data_type: TYPE_INT32 source_input: [ "IN", "IN" ] } ]`,
			wantErr: "batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 2 for m"},
		{name: "batch input int64", text: onnx + `batch_input [ { data_type: TYPE_INT64 source_input: "IN" } ]`,
			wantErr: "batch input data type must be TYPE_INT32 or TYPE_FP32 for m"},
		{name: "batch input unknown source", text: onnx + `batch_input [ { data_type: TYPE_FP32 source_input: "NOPE" } ]`,
			wantErr: "unknown source input name 'NOPE' for m"},
		{name: "batch input without target", text: onnx + `batch_input [ { kind: BATCH_ELEMENT_COUNT data_type: TYPE_INT32 source_input: "IN" } ]`,
			wantErr: "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 target name, got 0 for m"},
		{name: "batch input two targets", text: onnx + `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: [ "A", "B" ] data_type: TYPE_INT32 source_input: "IN" } ]`,
			wantErr: "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 target name, got 2 for m"},
		{name: "batch input target is an input", text: onnx + `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "IN" data_type: TYPE_INT32 source_input: "IN" } ]`,
			wantErr: "batch input target name 'IN' must be non-empty and differ from every input name for m"},
		{name: "batch input unknown kind number", text: onnx + `batch_input [ { kind: 42 data_type: TYPE_FP32 source_input: "IN" } ]`,
			wantErr: "unknown batch input kind '42'"},
		{name: "batch output valid", text: onnx + `batch_output [ { target_name: "OUT" source_input: "IN" } ]`},
		{name: "batch output unknown target", text: onnx + `batch_output [ { target_name: "X" source_input: "IN" } ]`,
			wantErr: "unknown target output name 'X' for m"},
		{name: "batch output target twice", text: onnx + `batch_output [ { target_name: [ "OUT", "OUT" ] source_input: "IN" } ]`,
			wantErr: "target output name 'OUT' can only be specified once for m"},
		{name: "batch output no source", text: onnx + `batch_output [ { target_name: "OUT" } ]`,
			wantErr: "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0 for m"},

		// Ensembles.
		{name: "ensemble valid", text: readGolden("ensemble")},
		{name: "ensemble without scheduling", text: `name: "m" platform: "ensemble"`,
			wantErr: "ensemble scheduling must be set for ensemble m whose platform is ensemble"},
		{name: "ensemble scheduling on onnx model", text: onnx + `ensemble_scheduling { step [ { model_name: "a" } ] }`,
			wantErr: "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"},
		{name: "ensemble with instance group", text: ensembleWith(`instance_group [ { kind: KIND_CPU } ]`),
			wantErr: "instance group should not be specified for ensemble 'm'"},
		{name: "ensemble with optimization", text: ensembleWith(`optimization { graph { level: 1 } }`),
			wantErr: "optimization should not be specified for ensemble 'm'"},
		{name: "ensemble with warmup", text: ensembleWith(`model_warmup [ { name: "w" } ]`),
			wantErr: "model_warmup can not be specified for ensemble 'm'"},
		{name: "ensemble without steps", text: `name: "m" platform: "ensemble" ensemble_scheduling { }`,
			wantErr: "must specify 'step' for ensemble 'm'"},
		{name: "ensemble step without model name", text: `name: "m" platform: "ensemble" ensemble_scheduling { step [ { input_map { key: "a" value: "b" } } ] }`,
			wantErr: "must specify 'model_name' in step 0 of ensemble 'm'"},
		{name: "ensemble step without input map", text: `name: "m" platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" output_map { key: "a" value: "b" } } ] }`,
			wantErr: "must specify 'input_map' in step 0 of ensemble 'm'"},
		{name: "ensemble step without output map", text: `name: "m" platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" input_map { key: "a" value: "b" } } ] }`,
			wantErr: "must specify 'output_map' in step 0 of ensemble 'm'"},
		{name: "ensemble tensor written twice", text: ensembleSteps(
			`{ model_name: "a" input_map { key: "i" value: "IN" } output_map { key: "o" value: "OUT" } },
			 { model_name: "b" input_map { key: "i" value: "IN" } output_map { key: "o" value: "OUT" } }`),
			wantErr: "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'm' step 1"},
		{name: "ensemble input unused", text: ensembleSteps(
			`{ model_name: "a" input_map { key: "i" value: "OTHER" } output_map { key: "o" value: "OUT" } }`),
			wantErr: "ensemble input 'IN' for ensemble m' is not used"},
		{name: "ensemble output never produced", text: ensembleSteps(
			`{ model_name: "a" input_map { key: "i" value: "IN" } output_map { key: "o" value: "MID" } }`),
			wantErr: "ensemble output 'OUT' for ensemble m' is not used"},
		{name: "ensemble output not reachable", text: ensembleSteps(
			`{ model_name: "a" input_map { key: "i" value: "IN" } output_map { key: "o" value: "X" } },
			 { model_name: "b" input_map { key: "i" value: "X" } input_map { key: "j" value: "GHOST" } output_map { key: "o" value: "OUT" } }`),
			wantErr: "output 'OUT' for ensemble 'm' is not written: at least one of its depending tensors, 'GHOST', is not connected"},
		{name: "ensemble intermediate tensor unused", text: ensembleSteps(
			`{ model_name: "a" input_map { key: "i" value: "IN" } output_map [ { key: "o" value: "OUT" }, { key: "p" value: "SPARE" } ] }`),
			wantErr: "ensemble tensor 'SPARE' is unused in ensemble 'm'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = "m"
			}
			cfg := mustParse(t, tc.text)
			if !tc.noNorm {
				if err := Normalize(cfg, dir, false); err != nil {
					t.Fatalf("Normalize: %v", err)
				}
			}
			wantErr(t, Validate(cfg, dir, true), tc.wantErr)
		})
	}
}

// TestValidateTensorRulesFlag checks that tensorRules=false skips the
// tensor rules (auto-complete on) while ValidateTensors still applies them.
func TestValidateTensorRulesFlag(t *testing.T) {
	cfg := mustParse(t, onnxNoIO+`input [ { name: "X" data_type: TYPE_FP32 dims: [ 0 ] } ]`)
	if err := Normalize(cfg, "m", false); err != nil {
		t.Fatal(err)
	}
	if err := Validate(cfg, "m", false); err != nil {
		t.Fatalf("Validate without tensor rules: %v", err)
	}
	wantErr(t, ValidateTensors(cfg), "dimension must be integer >= 1")
}

func TestValidateNil(t *testing.T) {
	if Validate(nil, "m", true) == nil || ValidateTensors(nil) == nil {
		t.Fatal("nil config must be rejected")
	}
}

func readGolden(name string) string {
	b, err := readFileForTable("testdata/golden/" + name + ".pbtxt")
	if err != nil {
		panic(err)
	}
	return strings.Replace(b, `name: "`+name+`"`, `name: "m"`, 1)
}

func ensembleWith(extra string) string {
	return ensembleSteps(`{ model_name: "a" input_map { key: "i" value: "IN" } output_map { key: "o" value: "OUT" } }`) + extra
}

func ensembleSteps(steps string) string {
	return `name: "m" platform: "ensemble" max_batch_size: 1
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling { step [ ` + steps + ` ] }
`
}
