package onnxrt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// Sequence models: control inputs and implicit state reach ONNX Runtime as
// ordinary tensors after the config's inputs, and state outputs come back
// beside the config's outputs (triton-inference-server/onnxruntime_backend
// src/onnxruntime.cc).

func TestLoadSequenceValidation(t *testing.T) {
	acc := ob.Must(ob.Accumulator(ob.Int32))
	controls := ob.Must(ob.SequenceControls(ob.Int32, ob.Uint64))
	accConfig := ob.AccumulatorConfig(ob.Int32)
	ctlConfig := ob.SequenceControlsConfig(ob.Int32, ob.Uint64)
	// wideStart is SequenceControls with START of shape [-1, 2].
	g := ob.NewGraph("wide_start")
	g.Input("INPUT", ob.Int32, -1, 1)
	g.Input("START", ob.Int32, -1, 2)
	g.Output("OUTPUT", ob.Int32, -1, 1)
	g.Node("Identity", []string{"INPUT"}, []string{"OUTPUT"})
	wideStart := ob.Must(ob.Model(g, ob.DefaultOpset))
	startOnly := `max_batch_size: 8
		input { name: "INPUT" data_type: TYPE_INT32 dims: 1 }
		output { name: "OUTPUT" data_type: TYPE_INT32 dims: 1 }
		sequence_batching { control_input { name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } } }`
	tests := []struct {
		name    string
		model   []byte
		config  string
		wantErr string // "" means the instance loads
		code    core.Code
	}{
		{name: "accumulator", model: acc, config: accConfig},
		{name: "accumulator FP32", model: ob.Must(ob.Accumulator(ob.Float)), config: ob.AccumulatorConfig(ob.Float)},
		{name: "controls INT32 UINT64", model: controls, config: ctlConfig},
		{name: "controls FP32 STRING", model: ob.Must(ob.SequenceControls(ob.Float, ob.String)), config: ob.SequenceControlsConfig(ob.Float, ob.String)},
		{name: "controls BOOL INT64", model: ob.Must(ob.SequenceControls(ob.Bool, ob.Int64)), config: ob.SequenceControlsConfig(ob.Bool, ob.Int64)},
		{name: "controls BOOL UINT32", model: ob.Must(ob.SequenceControls(ob.Bool, ob.Uint32)), config: ob.SequenceControlsConfig(ob.Bool, ob.Uint32)},
		{name: "growing state", model: ob.Must(ob.GrowingState(ob.Int64)), config: ob.GrowingStateConfig(ob.Int64)},
		{
			// The state output may also be a config output, which lets
			// clients ask for it (triton-inference-server/server
			// docs/user_guide/implicit_state_management.md).
			name:   "state output listed as an output too",
			model:  acc,
			config: accConfig + `output { name: "STATE_OUT" data_type: TYPE_INT32 dims: 1 }`,
		},
		{
			name:    "control the graph lacks",
			model:   acc,
			config:  strings.Replace(accConfig, "sequence_batching {", `sequence_batching { control_input { name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } }`, 1),
			wantErr: "configuration specified sequence control 'START', but model does not provide that input",
			code:    core.CodeInternal,
		},
		{
			name:    "boolean control of the wrong type",
			model:   controls,
			config:  strings.ReplaceAll(ctlConfig, "int32_false_true: [ 0, 1 ]", "fp32_false_true: [ 0, 1 ]"),
			wantErr: "unable to load model 'm', sequence control 'START', the model expects data-type INT32 but the model configuration specifies data-type TYPE_FP32",
		},
		{
			name:    "CORRID of the wrong type",
			model:   controls,
			config:  strings.Replace(ctlConfig, "CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64", "CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64", 1),
			wantErr: "unable to load model 'm', sequence control 'CORRID', the model expects data-type UINT64 but the model configuration specifies data-type TYPE_INT64",
		},
		{
			// Triton checks START, END, READY, CORRID in that order,
			// whatever the order of control_input.
			name:  "controls are checked by kind",
			model: controls,
			config: `max_batch_size: 8
				input { name: "INPUT" data_type: TYPE_INT32 dims: 1 }
				output { name: "OUTPUT" data_type: TYPE_INT32 dims: 1 }
				sequence_batching { control_input [
					{ name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 } },
					{ name: "READY" control { kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true] } },
					{ name: "END" control { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } },
					{ name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } } ] }`,
			wantErr: "sequence control 'READY', the model expects data-type INT32 but the model configuration specifies data-type TYPE_BOOL",
		},
		{
			name:    "control wider than [1]",
			model:   wideStart,
			config:  startOnly,
			wantErr: "unable to load model 'm', sequence control 'START' in model has dims [2] but dims [1] is expected",
		},
		{
			// Without batching the whole [-1,1] is compared with [1].
			name:    "batch-shaped control on a model that does not batch",
			model:   controls,
			config:  strings.ReplaceAll(strings.Replace(ctlConfig, "max_batch_size: 8", "max_batch_size: 0", 1), "dims: [ 1 ]", "dims: [ -1, 1 ]"),
			wantErr: "unable to load model 'm', sequence control 'START' in model has dims [-1,1] but dims [1] is expected",
		},
		{
			name:    "controls count toward the inputs",
			model:   ob.Must(ob.Identity(ob.Int32, -1, 1)),
			config:  strings.ReplaceAll(startOnly, `"START"`, `"INPUT0"`),
			wantErr: "unable to load model 'm', configuration expects 2 inputs, model provides 1",
		},
		{
			name:    "states count toward the inputs",
			model:   acc,
			config:  accConfig[:strings.Index(accConfig, "sequence_batching {")],
			wantErr: "unable to load model 'm', configuration expects 1 inputs, model provides 2",
		},
		{
			name:    "state input the graph lacks",
			model:   acc,
			config:  strings.Replace(accConfig, `input_name: "STATE_IN"`, `input_name: "STATE_X"`, 1),
			wantErr: "unexpected inference input 'STATE_X', allowed inputs are: INPUT, STATE_IN",
		},
		{
			name:    "state output the graph lacks",
			model:   acc,
			config:  strings.Replace(accConfig, `output_name: "STATE_OUT"`, `output_name: "STATE_X"`, 1),
			wantErr: "unexpected inference output 'STATE_X', allowed outputs are: OUTPUT, STATE_OUT",
		},
		{
			name:  "state of the wrong type",
			model: acc,
			config: strings.Replace(accConfig, `output_name: "STATE_OUT" data_type: TYPE_INT32`,
				`output_name: "STATE_OUT" data_type: TYPE_FP32`, 1),
			wantErr: "unable to load model 'm', configuration expects datatype TYPE_FP32 for input state 'STATE_IN', model provides TYPE_INT32",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := version(t, "m", tc.model)
			checkLoad(t, v, tc.config, tc.wantErr, tc.code)
		})
	}
}

// TestExecuteAccumulator runs the accumulator as the sequence batcher
// feeds it: config input, then state, in one batch of three slots (and of
// one), STATE_OUT carried into the next STATE_IN.
func TestExecuteAccumulator(t *testing.T) {
	for _, elem := range []ob.DataType{ob.Int32, ob.Float} {
		for _, slots := range []int64{3, 1} {
			t.Run(fmt.Sprintf("%v/slots=%d", elem, slots), func(t *testing.T) {
				v := version(t, "acc", ob.Must(ob.Accumulator(elem)))
				in := load(t, v, config(t, ob.AccumulatorConfig(elem)))
				shape := []int64{slots, 1}
				state := make([]float64, slots)
				sums := make([]float64, slots)
				for step := range 5 {
					x := make([]float64, slots)
					for s := range x {
						x[s] = float64((s + 1) * (step + 1))
						sums[s] += x[s]
					}
					res := execute(t, in, []string{"OUTPUT", "STATE_OUT"},
						tensor(t, "INPUT", elem, shape, x), tensor(t, "STATE_IN", elem, shape, state))
					out, next := decode(t, elem, res[0]), decode(t, elem, res[1])
					if !slices.Equal(out, sums) || !slices.Equal(next, sums) {
						t.Fatalf("step %d: OUTPUT %v STATE_OUT %v, want %v", step, out, next, sums)
					}
					for _, r := range res {
						if !equalShape(r.Shape, shape) {
							t.Errorf("%s shape %v, want %v", r.Name, r.Shape, shape)
						}
					}
					state = next
				}
			})
		}
	}
}

// TestExecuteSequenceControls feeds each control as the batcher would, a
// [slots, 1] tensor after INPUT, and reads back what the model saw.
func TestExecuteSequenceControls(t *testing.T) {
	tests := []struct {
		control, corrid ob.DataType
	}{
		{ob.Int32, ob.Uint64}, {ob.Float, ob.Int64}, {ob.Bool, ob.Uint32}, {ob.Int32, ob.Int32}, {ob.Int32, ob.String},
	}
	for _, tc := range tests {
		t.Run(tc.control.String()+"/"+tc.corrid.String(), func(t *testing.T) {
			v := version(t, "ctl", ob.Must(ob.SequenceControls(tc.control, tc.corrid)))
			in := load(t, v, config(t, ob.SequenceControlsConfig(tc.control, tc.corrid)))
			shape := []int64{3, 1}
			start, end, ready := []float64{1, 0, 0}, []float64{0, 1, 0}, []float64{1, 1, 0}
			var corrid *core.Tensor
			if tc.corrid == ob.String {
				corrid = stringTensor("CORRID", shape, "first", "second", "")
			} else {
				corrid = tensor(t, "CORRID", tc.corrid, shape, []float64{17, 1 << 30, 0})
			}
			outputs := []string{"OUTPUT", "OUTPUT_CORRID", "OUTPUT_END", "OUTPUT_READY", "OUTPUT_START"}
			res := execute(t, in, outputs,
				tensor(t, "INPUT", ob.Int32, shape, []float64{4, -5, 6}),
				tensor(t, "START", tc.control, shape, start),
				tensor(t, "END", tc.control, shape, end),
				tensor(t, "READY", tc.control, shape, ready),
				corrid)
			if got := decode(t, ob.Int32, res[0]); !slices.Equal(got, []float64{4, -5, 0}) {
				t.Errorf("OUTPUT = %v, want INPUT × READY", got)
			}
			if tc.corrid == ob.String {
				if string(res[1].Data) != string(corrid.Data) {
					t.Errorf("OUTPUT_CORRID = %q, want %q", res[1].Data, corrid.Data)
				}
			} else if got := decode(t, tc.corrid, res[1]); !slices.Equal(got, []float64{17, 1 << 30, 0}) {
				t.Errorf("OUTPUT_CORRID = %v", got)
			}
			for i, want := range [][]float64{end, ready, start} {
				if got := decode(t, tc.control, res[2+i]); !slices.Equal(got, want) {
					t.Errorf("%s = %v, want %v", outputs[2+i], got, want)
				}
			}
			for _, r := range res {
				if !equalShape(r.Shape, shape) {
					t.Errorf("%s shape %v, want %v", r.Name, r.Shape, shape)
				}
			}
		})
	}
}

// TestExecuteGrowingState runs a state whose shape changes every request:
// ORT allocates STATE_OUT, and the next run takes it as STATE_IN.
func TestExecuteGrowingState(t *testing.T) {
	for _, elem := range ob.GrowingStateTypes {
		t.Run(elem.String(), func(t *testing.T) {
			v := version(t, "grow", ob.Must(ob.GrowingState(elem)))
			in := load(t, v, config(t, ob.GrowingStateConfig(elem)))
			state := []float64{0}
			sum := 0.0
			for step := 1; step <= 12; step++ {
				x := float64(step*2 - 1)
				sum += x
				res := execute(t, in, []string{"HISTORY", "OUTPUT", "STATE_OUT"},
					tensor(t, "INPUT", elem, []int64{1}, []float64{x}),
					tensor(t, "STATE_IN", elem, []int64{int64(len(state))}, state))
				want := append(slices.Clone(state), x)
				if got := decode(t, elem, res[1]); !slices.Equal(got, []float64{sum}) || !equalShape(res[1].Shape, []int64{1}) {
					t.Fatalf("step %d: OUTPUT %v %v, want [%v]", step, res[1].Shape, got, sum)
				}
				for _, r := range []*core.Tensor{res[0], res[2]} {
					if got := decode(t, elem, r); !slices.Equal(got, want) || !equalShape(r.Shape, []int64{int64(step + 1)}) {
						t.Fatalf("step %d: %s %v %v, want %v", step, r.Name, r.Shape, got, want)
					}
				}
				state = decode(t, elem, res[2])
			}
		})
	}
}

// TestAutoCompleteSequence: control and state tensors are fed by the
// sequence batcher, so auto-complete leaves them out of the config's inputs
// (Triton would list them, and its own input count check would then refuse
// the model); the state output stays a graph output like any other.
func TestAutoCompleteSequence(t *testing.T) {
	tests := []struct {
		name         string
		model        []byte
		config, want string
	}{{
		name:  "accumulator",
		model: ob.Must(ob.Accumulator(ob.Int32)),
		config: `max_batch_size: 8 sequence_batching { state { input_name: "STATE_IN" output_name: "STATE_OUT"
			data_type: TYPE_INT32 dims: 1 } }`,
		want: `max_batch_size: 8 sequence_batching { state { input_name: "STATE_IN" output_name: "STATE_OUT"
			data_type: TYPE_INT32 dims: 1 } }
			input { name: "INPUT" data_type: TYPE_INT32 dims: 1 }
			output { name: "OUTPUT" data_type: TYPE_INT32 dims: 1 }
			output { name: "STATE_OUT" data_type: TYPE_INT32 dims: 1 }`,
	}, {
		name:  "controls",
		model: ob.Must(ob.SequenceControls(ob.Int32, ob.Uint64)),
		config: `sequence_batching { control_input [
			{ name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } },
			{ name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } } ] }
			output { name: "OUTPUT" data_type: TYPE_INT32 dims: 1 }`,
		want: `max_batch_size: 4 sequence_batching { control_input [
			{ name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } },
			{ name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } } ] }
			input { name: "INPUT" data_type: TYPE_INT32 dims: 1 }
			input { name: "END" data_type: TYPE_INT32 dims: 1 }
			input { name: "READY" data_type: TYPE_INT32 dims: 1 }
			output { name: "OUTPUT" data_type: TYPE_INT32 dims: 1 }`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := version(t, "m", tc.model)
			cfg := config(t, tc.config)
			if err := testBackend.AutoComplete(context.Background(), v, cfg); err != nil {
				t.Fatal(err)
			}
			want := config(t, tc.want)
			if got, w := prototext.Format(cfg), prototext.Format(want); got != w {
				t.Errorf("config =\n%s\nwant\n%s", got, w)
			}
		})
	}
	// The completed accumulator config loads.
	v := version(t, "m", ob.Must(ob.Accumulator(ob.Int32)))
	cfg := config(t, tests[0].config)
	if err := testBackend.AutoComplete(context.Background(), v, cfg); err != nil {
		t.Fatal(err)
	}
	load(t, v, cfg)
}
