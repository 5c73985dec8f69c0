package onnxrt

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/onnxbuild/onnxpb"
	"github.com/inferd/inferd/repo/modelconfig"
)

// addSubConfig is the quickstart "simple" config over AddSub(FP32, -1, 16).
const addSubConfig = `max_batch_size: 8
	input { name: "INPUT0" data_type: TYPE_FP32 dims: 16 }
	input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }
	output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
	output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }
`

func TestLoadValidation(t *testing.T) {
	addSub := ob.Must(ob.AddSub(ob.Float, -1, 16))
	fixed := ob.Must(ob.Identity(ob.Float, 10))       // [10] -> [10]
	dynamic := ob.Must(ob.Identity(ob.Float, -1, -1)) // [-1,-1] -> [-1,-1]
	defaulted := overridable(t)
	tests := []struct {
		name    string
		model   []byte
		config  string
		wantErr string // substring; "" means the instance loads
		code    core.Code
	}{
		{name: "simple loads", model: addSub, config: addSubConfig},
		{
			name:    "decoupled",
			model:   addSub,
			config:  addSubConfig + "model_transaction_policy { decoupled: true }",
			wantErr: "unable to load model 'm', the onnxruntime backend does not support model_transaction_policy { decoupled: true }",
			code:    core.CodeInvalidArg,
		},
		{
			// Triton's ORT backend refuses optional inputs on batching models.
			name:  "optional input on a batching model",
			model: defaulted,
			config: strings.Replace(addSubConfig, `name: "INPUT1" data_type: TYPE_FP32 dims: 16`,
				`name: "INPUT1" data_type: TYPE_FP32 dims: 16 optional: true`, 1),
			wantErr: "unable to load model 'm', optional input 'INPUT1' is not supported for models that support batching",
		},
		{
			// As in Triton, the count (which leaves optional inputs out) is
			// checked first.
			name:  "optional input that is a required graph input",
			model: addSub,
			config: strings.Replace(addSubConfig, `name: "INPUT1" data_type: TYPE_FP32 dims: 16`,
				`name: "INPUT1" data_type: TYPE_FP32 dims: 16 optional: true`, 1),
			wantErr: "unable to load model 'm', configuration expects 1 inputs, model provides 2",
		},
		{
			// Outputs compare exactly: a config -1 does not match a fixed dim.
			name:  "output -1 against a fixed model dim",
			model: fixed,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: 10 }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: -1 }`,
			wantErr: "model 'm', tensor 'OUTPUT0': the model expects 1 dimensions (shape [10]) but the model configuration specifies 1 dimensions (shape [-1])",
		},
		{
			name:  "input -1 against a fixed model dim",
			model: fixed,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: -1 }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 10 }`,
			wantErr: "tensor 'INPUT0': the model expects 1 dimensions (shape [10]) but the model configuration specifies 1 dimensions (shape [-1])",
		},
		{
			name:  "config may fix what the model leaves dynamic (inputs only)",
			model: dynamic,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [2, 3] }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, -1] }`,
		},
		{
			name:  "outputs compare exactly, wildcards too",
			model: dynamic,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [2, 3] }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [2, 3] }`,
			wantErr: "tensor 'OUTPUT0': the model expects 2 dimensions (shape [-1,-1]) but the model configuration specifies 2 dimensions (shape [2,3])",
		},
		{
			name:  "rank mismatch",
			model: dynamic,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: [6] }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, -1] }`,
			wantErr: "tensor 'INPUT0': the model expects 2 dimensions (shape [-1,-1]) but the model configuration specifies 1 dimensions (shape [6])",
		},
		{
			name:  "batching needs a dynamic first model dim",
			model: fixed,
			config: `max_batch_size: 4
				input { name: "INPUT0" data_type: TYPE_FP32 dims: [] }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [] }`,
			wantErr: "model 'm', tensor 'INPUT0': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is [10]",
		},
		{
			name:  "batching model without the batch dim in dims",
			model: addSub,
			config: `input { name: "INPUT0" data_type: TYPE_FP32 dims: 16 }
				input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
				output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }`,
			wantErr: "the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 1 dimensions (shape [16])",
		},
		{
			name:  "reshape is what the model sees",
			model: ob.Must(ob.Identity(ob.Float, -1)),
			config: `max_batch_size: 4
				input { name: "INPUT0" data_type: TYPE_FP32 dims: 1 reshape {} }
				output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 1 reshape {} }`,
		},
		{
			name:    "datatype mismatch",
			model:   addSub,
			config:  strings.Replace(addSubConfig, `"INPUT1" data_type: TYPE_FP32`, `"INPUT1" data_type: TYPE_INT32`, 1),
			wantErr: "unable to load model 'm', configuration expects datatype TYPE_INT32 for input 'INPUT1', model provides TYPE_FP32",
		},
		{
			name:    "output datatype mismatch",
			model:   addSub,
			config:  strings.Replace(addSubConfig, `"OUTPUT1" data_type: TYPE_FP32`, `"OUTPUT1" data_type: TYPE_FP16`, 1),
			wantErr: "configuration expects datatype TYPE_FP16 for output 'OUTPUT1', model provides TYPE_FP32",
		},
		{
			name:    "too few inputs",
			model:   addSub,
			config:  strings.Replace(addSubConfig, `input { name: "INPUT1" data_type: TYPE_FP32 dims: 16 }`, "", 1),
			wantErr: "unable to load model 'm', configuration expects 1 inputs, model provides 2",
		},
		{
			name:    "too many inputs",
			model:   addSub,
			config:  addSubConfig + `input { name: "INPUT2" data_type: TYPE_FP32 dims: 16 }`,
			wantErr: "unable to load model 'm', configuration expects 3 inputs, model provides 2",
		},
		{
			name:    "unknown input name",
			model:   addSub,
			config:  strings.Replace(addSubConfig, `"INPUT1"`, `"INPUTX"`, 1),
			wantErr: "unexpected inference input 'INPUTX', allowed inputs are: INPUT0, INPUT1",
		},
		{
			name:    "unknown output name",
			model:   addSub,
			config:  strings.Replace(addSubConfig, `"OUTPUT1"`, `"OUTPUTX"`, 1),
			wantErr: "unexpected inference output 'OUTPUTX', allowed outputs are: OUTPUT0, OUTPUT1",
		},
		{
			name:   "a subset of outputs is fine",
			model:  addSub,
			config: strings.Replace(addSubConfig, `output { name: "OUTPUT1" data_type: TYPE_FP32 dims: 16 }`, "", 1),
		},
		{
			name:  "scalar model tensors take only 1s",
			model: ob.Must(ob.Identity(ob.Int32)),
			config: `input { name: "INPUT0" data_type: TYPE_INT32 dims: 2 }
				output { name: "OUTPUT0" data_type: TYPE_INT32 dims: 1 }`,
			wantErr: "unable to load model 'm', scalar tensor 'INPUT0', should only provide 1 in the model configuration when the model doesn't support batching. Model configuration provided: [2].",
		},
		{
			name:    "missing model file",
			model:   nil,
			config:  addSubConfig,
			wantErr: "unable to find '",
			code:    core.CodeUnavailable,
		},
		// Unknown accelerators fail the load.
		{
			name:    "unknown CPU accelerator",
			model:   addSub,
			config:  addSubConfig + `optimization { execution_accelerators { cpu_execution_accelerator { name: "openvino" } } }`,
			wantErr: "unknown Execution Accelerator 'openvino' is requested",
		},
		{
			name:   "GPU accelerators are ignored on CPU instances",
			model:  addSub,
			config: addSubConfig + `optimization { execution_accelerators { gpu_execution_accelerator { name: "foo" } } }`,
		},
		// Session parameters (triton-inference-server/onnxruntime_backend README.md).
		{
			name:    "execution_mode 2",
			model:   addSub,
			config:  addSubConfig + `parameters { key: "execution_mode" value { string_value: "2" } }`,
			wantErr: "Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 but got 2 .",
		},
		{name: "execution_mode 1", model: addSub, config: addSubConfig + `parameters { key: "execution_mode" value { string_value: "1" } }`},
		{name: "enable_mem_arena off", model: addSub, config: addSubConfig + `parameters { key: "enable_mem_arena" value { string_value: "off" } }`},
		{name: "enable_mem_pattern FALSE", model: addSub, config: addSubConfig + `parameters { key: "enable_mem_pattern" value { string_value: "FALSE" } }`},
		{
			name:    "enable_mem_arena not a bool",
			model:   addSub,
			config:  addSubConfig + `parameters { key: "enable_mem_arena" value { string_value: "maybe" } }`,
			wantErr: "failed to convert 'maybe' to boolean",
		},
		{
			name:    "thread count not a number",
			model:   addSub,
			config:  addSubConfig + `parameters { key: "intra_op_thread_count" value { string_value: "many" } }`,
			wantErr: "failed to convert 'many' to integral number",
		},
		{
			name:  "thread counts and spinning",
			model: addSub,
			config: addSubConfig + `parameters { key: "intra_op_thread_count" value { string_value: "2" } }
				parameters { key: "inter_op_thread_count" value { string_value: "1" } }
				parameters { key: "allow_spinning" value { string_value: "true" } }
				parameters { key: "session.intra_op.allow_spinning" value { string_value: "0" } }
				parameters { key: "session.use_device_allocator_for_initializers" value { string_value: "1" } }
				parameters { key: "memory.enable_memory_arena_shrinkage" value { string_value: "cpu:0" } }
				parameters { key: "unknown_key" value { string_value: "ignored" } }`,
		},
		// optimization.graph.level: 2 disables all, -1 basic, 1 extended.
		{name: "graph level 2", model: addSub, config: addSubConfig + `optimization { graph { level: 2 } }`},
		{name: "graph level 1", model: addSub, config: addSubConfig + `optimization { graph { level: 1 } }`},
		{name: "graph level -1", model: addSub, config: addSubConfig + `optimization { graph { level: -1 } }`},
		{name: "graph level 7", model: addSub, config: addSubConfig + `optimization { graph { level: 7 } }`},
		{
			name:    "custom op library that does not exist",
			model:   addSub,
			config:  addSubConfig + `model_operations { op_library_filename: "/nonexistent/libcustom.so" }`,
			wantErr: "register custom op library '/nonexistent/libcustom.so'",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := version(t, "m", ob.Must(ob.Identity(ob.Float, 1)))
			if tc.model != nil {
				v = version(t, "m", tc.model)
			} else {
				v.VersionDir += "-missing"
			}
			checkLoad(t, v, tc.config, tc.wantErr, tc.code)
		})
	}
}

// overridable is AddSub(FP32, -1, 16) whose INPUT1 has a default value (an
// initializer of the same name), so ORT lists only INPUT0 as required.
func overridable(t *testing.T) []byte {
	g := ob.NewGraph("defaulted")
	g.Input("INPUT0", ob.Float, -1, 16)
	g.Input("INPUT1", ob.Float, -1, 16)
	g.Output("OUTPUT0", ob.Float, -1, 16)
	g.Output("OUTPUT1", ob.Float, -1, 16)
	g.Node("Add", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0"})
	g.Node("Sub", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT1"})
	m, err := ob.ModelProto(g, ob.DefaultOpset)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 16*4)
	m.Graph.Initializer = append(m.Graph.Initializer, &onnxpb.TensorProto{
		Name: proto.String("INPUT1"), DataType: proto.Int32(int32(ob.Float)), Dims: []int64{1, 16}, RawData: raw,
	})
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGraphLevels(t *testing.T) {
	for level, want := range map[int32]string{
		0: "ORT_ENABLE_ALL", 2: "ORT_DISABLE_ALL", -1: "ORT_ENABLE_BASIC", 1: "ORT_ENABLE_EXTENDED", 5: "ORT_ENABLE_ALL",
	} {
		cfg := &modelconfig.ModelConfig{Optimization: &modelconfig.ModelOptimizationPolicy{
			Graph: &modelconfig.ModelOptimizationPolicy_Graph{Level: level},
		}}
		if got := graphLevel(cfg).String(); got != want {
			t.Errorf("level %d: %s, want %s", level, got, want)
		}
	}
}

func TestSessionEntries(t *testing.T) {
	tests := []struct {
		params       map[string]string
		intra, inter string
		extra        map[string]string
	}{
		{intra: "0", inter: "0"},
		{params: map[string]string{"allow_spinning": "on"}, intra: "1", inter: "1"},
		{params: map[string]string{"allow_spinning": "true", keyInterSpin: "0"}, intra: "1", inter: "0"},
		{params: map[string]string{keyIntraSpin: "1", "session.use_device_allocator_for_initializers": "1", "other": "x"},
			intra: "1", inter: "0", extra: map[string]string{"session.use_device_allocator_for_initializers": "1"}},
	}
	for _, tc := range tests {
		cfg := &modelconfig.ModelConfig{Parameters: map[string]*modelconfig.ModelParameter{}}
		for k, v := range tc.params {
			cfg.Parameters[k] = &modelconfig.ModelParameter{StringValue: v}
		}
		so, err := testBackend.newSessionOptions(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{keyIntraSpin: tc.intra, keyInterSpin: tc.inter}
		for k, v := range tc.extra {
			want[k] = v
		}
		for k, v := range want {
			if got, err := so.GetSessionConfigEntry(k); err != nil || got != v {
				t.Errorf("%v: %s = %q, %v; want %q", tc.params, k, got, err, v)
			}
		}
		so.Destroy()
	}
}

// checkLoad loads v with config text cfg on the CPU and checks the
// outcome: a load that succeeds when wantErr is empty, else an error
// containing wantErr with code (0: INVALID_ARG).
func checkLoad(t *testing.T, v core.VersionFiles, cfg, wantErr string, code core.Code) {
	t.Helper()
	in, err := loadKind(v, config(t, cfg), modelconfig.ModelInstanceGroup_KIND_CPU)
	if wantErr == "" {
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err == nil {
		in.Close()
		t.Fatalf("loaded, want error %q", wantErr)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("error = %q, want %q", err, wantErr)
	}
	if code == 0 {
		code = core.CodeInvalidArg
	}
	if got := core.CodeOf(err); got != code {
		t.Errorf("code = %v, want %v", got, code)
	}
}
