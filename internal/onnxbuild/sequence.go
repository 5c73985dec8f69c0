package onnxbuild

import (
	"fmt"
	"slices"
)

// Stateful models for the sequence batcher, each with the config.pbtxt a
// Triton user would write for it (triton-inference-server/server
// docs/user_guide/model_execution.md for control inputs,
// docs/user_guide/implicit_state_management.md for implicit state). The
// configs carry no name, so they fit any model folder; prepend
// `name: "..."` where one is wanted. Their max_sequence_idle_microseconds
// is a generous 60 s, so that slow test machines never see a sequence time
// out by accident. Their states start from zero (initial_state zero_data):
// without it Triton leaves a sequence's first input state uninitialized.

// SequenceIdleMicroseconds is the max_sequence_idle_microseconds of the
// configs below.
const SequenceIdleMicroseconds = 60_000_000

// Accumulator keeps a running sum per sequence in implicit state: inputs
// INPUT and STATE_IN, outputs OUTPUT = STATE_IN + INPUT and STATE_OUT = the
// same, all of type elem and shape [-1, 1] (batch first). Fed back through
// the sequence batcher's state, OUTPUT is the sum of the sequence's inputs
// so far. elem must be in AddSubTypes.
func Accumulator(elem DataType) ([]byte, error) {
	if err := checkType("Accumulator", elem, AddSubTypes); err != nil {
		return nil, err
	}
	g := NewGraph("accumulator")
	g.Input("INPUT", elem, -1, 1)
	g.Input("STATE_IN", elem, -1, 1)
	g.Output("OUTPUT", elem, -1, 1)
	g.Output("STATE_OUT", elem, -1, 1)
	g.Node("Add", []string{"STATE_IN", "INPUT"}, []string{"OUTPUT"})
	g.Node("Identity", []string{"OUTPUT"}, []string{"STATE_OUT"})
	return Model(g, addOpset(elem))
}

// AccumulatorConfig is Accumulator's config: max_batch_size 8, input INPUT
// and output OUTPUT of dims [1], and one implicit state STATE_IN/STATE_OUT
// of dims [1] that starts at zero, on one CPU instance.
func AccumulatorConfig(elem DataType) string {
	t := configType(elem)
	return fmt.Sprintf(`platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT" data_type: %[1]s dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: %[1]s dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: %[2]d
  state [ {
    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: %[1]s dims: [ 1 ]
    initial_state { name: "zero" data_type: %[1]s dims: [ 1 ] zero_data: true }
  } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`, t, SequenceIdleMicroseconds)
}

// Previous answers each request with the one before it, through implicit
// state: inputs INPUT and STATE_IN, outputs OUTPUT = STATE_IN and
// STATE_OUT = INPUT, all of type elem and shape [-1, 1]. A sequence's first
// request gets the initial state (zero, or an empty string for STRING). It
// takes every element type in AllTypes, STRING and BOOL included.
func Previous(elem DataType) ([]byte, error) {
	g := NewGraph("previous")
	g.Input("INPUT", elem, -1, 1)
	g.Input("STATE_IN", elem, -1, 1)
	g.Output("OUTPUT", elem, -1, 1)
	g.Output("STATE_OUT", elem, -1, 1)
	g.Node("Identity", []string{"STATE_IN"}, []string{"OUTPUT"})
	g.Node("Identity", []string{"INPUT"}, []string{"STATE_OUT"})
	return Model(g, DefaultOpset)
}

// PreviousConfig is Previous' config: as AccumulatorConfig, for elem.
func PreviousConfig(elem DataType) string { return AccumulatorConfig(elem) }

// ControlTypes are the element types of START, END and READY that Triton's
// sequence controls produce: int32_false_true, fp32_false_true and
// bool_false_true.
var ControlTypes = []DataType{Int32, Float, Bool}

// CorrIDTypes are the element types a CONTROL_SEQUENCE_CORRID tensor may
// have (STRING is Triton's TYPE_STRING).
var CorrIDTypes = []DataType{Uint64, Int64, Uint32, Int32, String}

// SequenceControls shows what the sequence batcher feeds: inputs INPUT
// (INT32), START, END and READY (of type control, one of ControlTypes) and
// CORRID (of type corrid, one of CorrIDTypes), all [-1, 1]. Outputs:
// OUTPUT = INPUT × READY (INT32), and OUTPUT_START, OUTPUT_END,
// OUTPUT_READY and OUTPUT_CORRID, copies of the controls (their types,
// [-1, 1]).
func SequenceControls(control, corrid DataType) ([]byte, error) {
	if err := checkType("SequenceControls control", control, ControlTypes); err != nil {
		return nil, err
	}
	if err := checkType("SequenceControls CORRID", corrid, CorrIDTypes); err != nil {
		return nil, err
	}
	g := NewGraph("sequence_controls")
	g.Input("INPUT", Int32, -1, 1)
	for _, c := range []string{"START", "END", "READY"} {
		g.Input(c, control, -1, 1)
	}
	g.Input("CORRID", corrid, -1, 1)
	g.Output("OUTPUT", Int32, -1, 1)
	for _, c := range []string{"START", "END", "READY"} {
		g.Output("OUTPUT_"+c, control, -1, 1)
	}
	g.Output("OUTPUT_CORRID", corrid, -1, 1)
	g.Node("Cast", []string{"READY"}, []string{"ready_int"}, AttrInt("to", int64(Int32)))
	g.Node("Mul", []string{"INPUT", "ready_int"}, []string{"OUTPUT"})
	for _, c := range []string{"START", "END", "READY", "CORRID"} {
		g.Node("Identity", []string{c}, []string{"OUTPUT_" + c})
	}
	return Model(g, DefaultOpset)
}

// SequenceControlsConfig is SequenceControls' config: max_batch_size 8,
// the four controls with false/true values 0/1 (false/true for BOOL), and
// every output, on one CPU instance.
func SequenceControlsConfig(control, corrid DataType) string {
	var ft string
	switch control {
	case Float:
		ft = "fp32_false_true: [ 0, 1 ]"
	case Bool:
		ft = "bool_false_true: [ false, true ]"
	default:
		ft = "int32_false_true: [ 0, 1 ]"
	}
	ct, it := configType(control), configType(corrid)
	return fmt.Sprintf(`platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUTPUT_START" data_type: %[1]s dims: [ 1 ] },
  { name: "OUTPUT_END" data_type: %[1]s dims: [ 1 ] },
  { name: "OUTPUT_READY" data_type: %[1]s dims: [ 1 ] },
  { name: "OUTPUT_CORRID" data_type: %[2]s dims: [ 1 ] }
]
sequence_batching {
  max_sequence_idle_microseconds: %[4]d
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START %[3]s } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END %[3]s } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY %[3]s } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: %[2]s } ] }
  ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`, ct, it, ft, SequenceIdleMicroseconds)
}

// GrowingStateTypes are the element types GrowingState accepts (those of
// ORT's CPU ReduceSum kernel).
var GrowingStateTypes = []DataType{Float, Int32, Int64, Double}

// GrowingState keeps a sequence's whole history in a state that grows by
// one element per request. It does not batch: inputs INPUT [1] and
// STATE_IN [-1], outputs STATE_OUT [-1] = Concat(STATE_IN, INPUT),
// HISTORY [-1] = the same, and OUTPUT [1] = ReduceSum(STATE_OUT), all of
// type elem. From the initial state of GrowingStateConfig, a zero of shape
// [1], the k-th request of a sequence sees a HISTORY of k+1 elements, 0 and
// its inputs so far, and their sum in OUTPUT. elem must be in
// GrowingStateTypes.
func GrowingState(elem DataType) ([]byte, error) { return growingState(elem, false) }

// GrowingStateBatched is GrowingState for a batching model: every tensor
// gains a batch dimension (INPUT and OUTPUT [-1, 1], the rest [-1, -1]).
// Sequences of different lengths so far cannot share a batch: their states
// do not concatenate.
func GrowingStateBatched(elem DataType) ([]byte, error) { return growingState(elem, true) }

func growingState(elem DataType, batched bool) ([]byte, error) {
	if err := checkType("GrowingState", elem, GrowingStateTypes); err != nil {
		return nil, err
	}
	axes, err := Encode(Int64, []float64{-1})
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: GrowingState axes: %w", err)
	}
	var batch []int64
	name := "growing_state"
	if batched {
		batch = []int64{-1}
		name = "growing_state_batched"
	}
	dims := func(d int64) []int64 { return append(slices.Clone(batch), d) }
	g := NewGraph(name)
	g.Input("INPUT", elem, dims(1)...)
	g.Input("STATE_IN", elem, dims(-1)...)
	g.Output("OUTPUT", elem, dims(1)...)
	g.Output("STATE_OUT", elem, dims(-1)...)
	g.Output("HISTORY", elem, dims(-1)...)
	g.Initializer("axes", Int64, []int64{1}, axes)
	g.Node("Concat", []string{"STATE_IN", "INPUT"}, []string{"STATE_OUT"}, AttrInt("axis", -1))
	g.Node("Identity", []string{"STATE_OUT"}, []string{"HISTORY"})
	g.Node("ReduceSum", []string{"STATE_OUT", "axes"}, []string{"OUTPUT"})
	return Model(g, DefaultOpset)
}

// GrowingStateConfig is GrowingState's config: max_batch_size 0, input
// INPUT [1], outputs OUTPUT [1] and HISTORY [-1], and the implicit state
// STATE_IN/STATE_OUT of dims [-1] that starts as one zero, on one CPU
// instance.
func GrowingStateConfig(elem DataType) string { return growingStateConfig(elem, 0) }

// GrowingStateBatchedConfig is GrowingStateBatched's config: as
// GrowingStateConfig with max_batch_size 8.
func GrowingStateBatchedConfig(elem DataType) string { return growingStateConfig(elem, 8) }

func growingStateConfig(elem DataType, maxBatch int) string {
	t := configType(elem)
	return fmt.Sprintf(`platform: "onnxruntime_onnx"
max_batch_size: %[3]d
input [ { name: "INPUT" data_type: %[1]s dims: [ 1 ] } ]
output [
  { name: "OUTPUT" data_type: %[1]s dims: [ 1 ] },
  { name: "HISTORY" data_type: %[1]s dims: [ -1 ] }
]
sequence_batching {
  max_sequence_idle_microseconds: %[2]d
  state [ {
    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: %[1]s dims: [ -1 ]
    initial_state { name: "zero" data_type: %[1]s dims: [ 1 ] zero_data: true }
  } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`, t, SequenceIdleMicroseconds, maxBatch)
}

// configType is the config.pbtxt name of an element type: TYPE_FP32 for
// FLOAT, TYPE_STRING for STRING, ...
func configType(elem DataType) string {
	switch elem {
	case Float:
		return "TYPE_FP32"
	case Float16:
		return "TYPE_FP16"
	case BFloat16:
		return "TYPE_BF16"
	case Double:
		return "TYPE_FP64"
	}
	if !slices.Contains(AllTypes, elem) {
		return "TYPE_INVALID"
	}
	return "TYPE_" + elem.String()
}
