package python

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// The sequence batcher hands a backend its control inputs and implicit
// state as ordinary tensors after the configured inputs, and lists each
// state's output_name among the requested outputs (core/sequence*.go).
// These tests speak to the worker directly with such requests, as the
// sequence batcher prepares them, without a server.

func int32Tensor(name string, shape []int64, vals ...int32) *core.Tensor {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: shape, Data: b}
}

func int32Values(t *testing.T, f frameIn, d tensorDesc) []int32 {
	t.Helper()
	tensor, err := f.tensor(d)
	servertest.Must(t, err)
	if tensor.DataType != core.TypeInt32 {
		t.Fatalf("%s: %s, want INT32", d.Name, tensor.DataType)
	}
	out := make([]int32, len(tensor.Data)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(tensor.Data[4*i:]))
	}
	return out
}

// seenTensor is one input as the seq_controls model saw it.
type seenTensor struct {
	Name     string `json:"name"`
	Datatype string `json:"datatype"`
	Shape    []int64
	Values   []any `json:"values"`
}

// seen is seq_controls' answer: what its request carried.
type seen struct {
	Inputs          []seenTensor `json:"inputs"`
	CorrelationID   any          `json:"correlation_id"`
	CorrelationType string       `json:"correlation_type"`
	Flags           uint32       `json:"flags"`
	Start, End      any
}

// TestWorkerControlInputs: the control tensors (START, END, READY, CORRID)
// reach model.py as inputs after the configured one, in
// control_input order, with their datatypes, shapes and values, through
// request.inputs() and pb_utils.get_input_tensor_by_name; the request's
// correlation id (an int up to 2^64-1, or a str) and flags arrive with
// them.
func TestWorkerControlInputs(t *testing.T) {
	const maxID = math.MaxUint64
	u64 := binary.LittleEndian.AppendUint64(nil, maxID)
	cases := []struct {
		model    string
		corr     any
		corrid   *core.Tensor
		wantID   any
		wantType string
		idValue  any
	}{
		{"seq_controls", uint64(maxID), &core.Tensor{Name: "CORRID", DataType: core.TypeUint64, Shape: []int64{1, 1}, Data: u64},
			json.Number("18446744073709551615"), "int", json.Number("18446744073709551615")},
		{"seq_controls_str", "seq-a", &core.Tensor{Name: "CORRID", DataType: core.TypeBytes, Shape: []int64{1, 1}, Data: append([]byte{5, 0, 0, 0}, "seq-a"...)},
			"seq-a", "str", "seq-a"},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			w := modelWorker(t, c.model, 0)
			out := &frameOut{}
			inputs := []*core.Tensor{
				int32Tensor("INPUT", []int64{1, 1}, 7),
				int32Tensor("START", []int64{1, 1}, 11),
				{Name: "END", DataType: core.TypeFP32, Shape: []int64{1, 1}, Data: binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5))},
				{Name: "READY", DataType: core.TypeBool, Shape: []int64{1, 1}, Data: []byte{1}},
				c.corrid,
			}
			req := wireRequest{RID: 1, CorrelationID: c.corr, Flags: core.FlagSequenceStart, Parameters: "{}", Requested: []string{"SEEN"}}
			for _, in := range inputs {
				req.Inputs = append(req.Inputs, out.add(in))
			}
			done, f := executeFrame(t, w, []wireRequest{req}, out)
			if done.Error != "" || len(done.Responses) != 1 || done.Responses[0] == nil || done.Responses[0].Error != nil {
				t.Fatalf("execute: %q %+v", done.Error, done.Responses)
			}
			tensor, err := f.tensor(done.Responses[0].Outputs[0])
			servertest.Must(t, err)
			elems, err := core.BytesElements(tensor.Data)
			servertest.Must(t, err)
			var s seen
			dec := json.NewDecoder(bytes.NewReader(elems[0]))
			dec.UseNumber()
			servertest.Must(t, dec.Decode(&s))
			want := []seenTensor{
				{"INPUT", "int32", []int64{1, 1}, []any{json.Number("7")}},
				{"START", "int32", []int64{1, 1}, []any{json.Number("11")}},
				{"END", "float32", []int64{1, 1}, []any{json.Number("0.5")}},
				{"READY", "bool", []int64{1, 1}, []any{true}},
				{"CORRID", map[string]string{"int": "uint64", "str": "object"}[c.wantType], []int64{1, 1}, []any{c.idValue}},
			}
			if len(s.Inputs) != len(want) {
				t.Fatalf("the model saw %d inputs, want %d: %+v", len(s.Inputs), len(want), s.Inputs)
			}
			for i, w := range want {
				g := s.Inputs[i]
				if g.Name != w.Name || g.Datatype != w.Datatype || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Values, w.Values) {
					t.Errorf("input %d: saw %+v, want %+v", i, g, w)
				}
			}
			if s.CorrelationID != c.wantID || s.CorrelationType != c.wantType || s.Flags != core.FlagSequenceStart {
				t.Errorf("correlation_id() %v (%s), flags() %d; want %v (%s), %d", s.CorrelationID, s.CorrelationType, s.Flags, c.wantID, c.wantType, core.FlagSequenceStart)
			}
			if s.Start != json.Number("11") || s.End != json.Number("0.5") {
				t.Errorf("get_input_tensor_by_name: START %v, END %v; want 11, 0.5", s.Start, s.End)
			}
		})
	}
}

// TestWorkerImplicitState: a model.py reads the state input INPUT_STATE
// like any input and returns the state output OUTPUT_STATE like any
// output; the worker hands it back when the request lists it among its
// requested outputs (the sequence batcher does) and drops it, as any
// unrequested output, when it does not. Fed back, the state grows as the
// model appends to it (dims -1).
func TestWorkerImplicitState(t *testing.T) {
	w := modelWorker(t, "seq_state", 0)
	state := int32Tensor("INPUT_STATE", []int64{1, 1}, 0) // placeholder at START
	var history []int32
	for i, x := range []int32{5, -2, 40, 3} {
		start := int32(0)
		if i == 0 {
			start = 1
		}
		out := &frameOut{}
		req := wireRequest{RID: int64(i + 1), CorrelationID: uint64(9), Parameters: "{}", Requested: []string{"OUTPUT", "OUTPUT_STATE"},
			Inputs: []tensorDesc{out.add(int32Tensor("INPUT", []int64{1, 1}, x)), out.add(int32Tensor("START", []int64{1, 1}, start)), out.add(state)}}
		done, f := executeFrame(t, w, []wireRequest{req}, out)
		if done.Error != "" || len(done.Responses) != 1 || done.Responses[0] == nil || done.Responses[0].Error != nil {
			t.Fatalf("request %d: %q %+v", i, done.Error, done.Responses)
		}
		history = append(history, x)
		outs := done.Responses[0].Outputs
		if len(outs) != 2 || outs[0].Name != "OUTPUT" || outs[1].Name != "OUTPUT_STATE" {
			t.Fatalf("request %d: outputs %+v, want OUTPUT and OUTPUT_STATE", i, outs)
		}
		if got := int32Values(t, f, outs[1]); !slices.Equal(got, history) || !slices.Equal(outs[1].Shape, []int64{1, int64(len(history))}) {
			t.Fatalf("request %d: OUTPUT_STATE %v of shape %v, want %v", i, got, outs[1].Shape, history)
		}
		if got := int32Values(t, f, outs[0]); !slices.Equal(got, history) {
			t.Fatalf("request %d: OUTPUT %v, want %v", i, got, history)
		}
		next, err := f.tensor(outs[1])
		servertest.Must(t, err)
		next.Name = "INPUT_STATE"
		state = next
	}
	// Not requested: the state output stays in the worker.
	out := &frameOut{}
	req := wireRequest{RID: 9, CorrelationID: uint64(9), Parameters: "{}", Requested: []string{"OUTPUT"},
		Inputs: []tensorDesc{out.add(int32Tensor("INPUT", []int64{1, 1}, 1)), out.add(int32Tensor("START", []int64{1, 1}, 1)), out.add(state)}}
	done, _ := executeFrame(t, w, []wireRequest{req}, out)
	if r := done.Responses; len(r) != 1 || r[0] == nil || len(r[0].Outputs) != 1 || r[0].Outputs[0].Name != "OUTPUT" {
		t.Fatalf("OUTPUT alone requested: %+v", r)
	}
}
