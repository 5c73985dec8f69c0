package instances

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/repo/modelconfig"
)

var must = servertest.Must

// le is little-endian bytes of vs (int32, int64, float32, bool, ...).
func le(vs ...any) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// byteElems are BYTES tensor data: each string's 4-byte length and bytes.
func byteElems(ss ...string) []byte {
	var b []byte
	for _, s := range ss {
		b = core.AppendBytesElement(b, []byte(s))
	}
	return b
}

func TestParseInstances(t *testing.T) {
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"instances", `{"instances":[[1]]}`, true},
		{"instances and parameters", `{"parameters":{"a":1},"instances":[[1]]}`, true},
		{"instances not an array", `{"instances":1}`, true}, // decode refuses it
		{"NaN, as the base route reads it", `{"instances":[[NaN]]}`, true},
		{"v2 body", `{"inputs":[]}`, false},
		{"v2 body naming instances", `{"instances":1,"inputs":[]}`, false},
		{"malformed", `{"instances":[[1]`, false},
		{"not an object", `["instances"]`, false},
		{"instances only in a string", `{"id":"\"instances\""}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, ok := Parse([]byte(c.body))
			if ok != c.ok || (ok && !q.Instances.Exists()) {
				t.Fatalf("Parse(%s) = %v, %v; want ok %v", c.body, q, ok, c.ok)
			}
		})
	}
}

// TestDecodeInstances builds core requests from instances directly: the
// tensors' shapes and bytes, and the parameters.
func TestDecodeInstances(t *testing.T) {
	configs := map[string]string{
		"batch": `max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 2 ] }, { name: "B" data_type: TYPE_STRING dims: [ -1 ] optional: true } ]`,
		"nobatch": `max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]`,
		"vardims": `max_batch_size: 4
input [ { name: "V" data_type: TYPE_INT64 dims: [ -1, -1 ] } ]`,
		"scalar": `max_batch_size: 4
input [ { name: "S" data_type: TYPE_BOOL dims: [ -1 ] } ]`,
		"fp16": `max_batch_size: 4
input [ { name: "H" data_type: TYPE_FP16 dims: [ 1 ] } ]`,
	}
	type tensor struct {
		name  string
		shape []int64
		data  []byte
	}
	for _, c := range []struct {
		name, config, body string
		want               []tensor
		check              func(t *testing.T, req *core.InferRequest)
		err                string // error substring
		status             int    // the error's status
	}{
		{name: "rows of one input", config: "batch", body: `{"instances":[{"A":[1,2]},{"A":[3,-4]}]}`,
			want: []tensor{{"A", []int64{2, 2}, le(int32(1), int32(2), int32(3), int32(-4))}}},
		{name: "optional BYTES input", config: "batch", body: `{"instances":[{"B":["x","y,z"],"A":[1,2]}]}`,
			want: []tensor{{"A", []int64{1, 2}, le(int32(1), int32(2))}, {"B", []int64{1, 2}, byteElems("x", "y,z")}}},
		{name: "repeated name keeps its last value", config: "batch", body: `{"instances":[{"A":[9,9],"A":[1,2]}]}`,
			want: []tensor{{"A", []int64{1, 2}, le(int32(1), int32(2))}}},
		{name: "nested whole tensor", config: "nobatch", body: `{"instances":[[[1,2],[3,4.5]]]}`,
			want: []tensor{{"X", []int64{2, 2}, le(float32(1), float32(2), float32(3), float32(4.5))}}},
		{name: "flat whole tensor", config: "nobatch", body: `{"instances":[[1,2,3,4]]}`,
			want: []tensor{{"X", []int64{2, 2}, le(float32(1), float32(2), float32(3), float32(4))}}},
		{name: "shape from nesting", config: "vardims", body: `{"instances":[[[1],[2],[3]],[[4],[5],[6]]]}`,
			want: []tensor{{"V", []int64{2, 3, 1}, le(int64(1), int64(2), int64(3), int64(4), int64(5), int64(6))}}},
		{name: "scalars", config: "scalar", body: `{"instances":[true,false,true]}`,
			want: []tensor{{"S", []int64{3, 1}, []byte{1, 0, 1}}}},
		{name: "empty rows", config: "vardims", body: `{"instances":[[],[]]}`,
			want: []tensor{{"V", []int64{2, 0}, []byte{}}}},
		{name: "parameters", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":{"priority":3,"timeout":7,"sequence_id":"s\u0000cut","sequence_start":true,"custom":"v","n":-2,"f":0.5,"binary_data_output":"ignored"}}`,
			want: []tensor{{"A", []int64{1, 2}, le(int32(1), int32(2))}},
			check: func(t *testing.T, req *core.InferRequest) {
				if req.Priority != 3 || req.TimeoutMicros != 7 {
					t.Errorf("priority %d, timeout %d", req.Priority, req.TimeoutMicros)
				}
				if c := req.Correlation; c.StringID != "s" || !c.IsString || c.Flags != core.FlagSequenceStart {
					t.Errorf("correlation %+v", c)
				}
				want := map[string]any{"custom": "v", "n": int64(-2), "f": 0.5}
				if len(req.Parameters) != len(want) {
					t.Errorf("parameters %v, want %v", req.Parameters, want)
				}
				for k, v := range want {
					if req.Parameters[k] != v {
						t.Errorf("parameter %s = %#v, want %#v", k, req.Parameters[k], v)
					}
				}
			}},
		{name: "parameter names cut at a NUL", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":{"k":1,"k\u0000x":2}}`,
			want: []tensor{{"A", []int64{1, 2}, le(int32(1), int32(2))}},
			check: func(t *testing.T, req *core.InferRequest) {
				if len(req.Parameters) != 1 || req.Parameters["k"] != int64(1) {
					t.Errorf("parameters %v, want k: 1", req.Parameters)
				}
			}},
		{name: "null parameters", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":null}`,
			want: []tensor{{"A", []int64{1, 2}, le(int32(1), int32(2))}}},

		{name: "mapping errors come first", config: "batch", body: `{"instances":[{"A":["x"]}],"parameters":{"priority":"x"}}`,
			err: "input 'A', instance 0 has 1 values, want 2", status: 400},
		{name: "object counts its names and values", config: "scalar", body: `{"instances":[{"S":{"a":true}}]}`,
			err: "input 'S', instance 0 has 2 values, want 1", status: 400},
		{name: "parameters before the data", config: "batch", body: `{"instances":[{"A":["x","y"]}],"parameters":{"priority":"x"}}`,
			err: "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer", status: 500},
		{name: "reserved parameter", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":{"triton_x":1}}`,
			err: "reserved for Triton usage", status: 400},
		{name: "parameter of no type", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":{"p":[1]}}`,
			err: "parameter 'p' has invalid type", status: 400},
		{name: "parameter name found only cut at a NUL", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":{"k\u0000x":2}}`,
			err: "parameter key 'k' was not found in the JSON", status: 500},
		{name: "parameters not an object", config: "batch", body: `{"instances":[{"A":[1,2]}],"parameters":[1]}`,
			err: "'parameters' must be a JSON object", status: 400},
		{name: "element type", config: "batch", body: `{"instances":[{"A":[1,"2"]}]}`,
			err: "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", status: 500},
		{name: "BYTES element type", config: "batch", body: `{"instances":[{"A":[1,2],"B":[1]}]}`,
			err: "Unable to parse JSON bytes array: attempt to access JSON non-string as string", status: 500},
		{name: "FP16 by JSON", config: "fp16", body: `{"instances":[[1]]}`,
			err: "receiving FP16 data via JSON is not supported", status: 400},
		{name: "different inputs", config: "batch", body: `{"instances":[{"A":[1,2]},{"A":[1,2],"B":["x"]}]}`,
			err: "instance 1 has inputs [A, B] but instance 0 has [A]", status: 400},
		{name: "ragged", config: "vardims", body: `{"instances":[[[1],[2]],[[1,2]]]}`,
			err: "input 'V': instance 1 has shape [1 2] but instance 0 has [2 1]", status: 400},
		{name: "not an array", config: "batch", body: `{"instances":null}`,
			err: "'instances' must be a non-empty JSON array", status: 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := modelconfig.Parse([]byte(configs[c.config]))
			must(t, err)
			q, ok := Parse([]byte(c.body))
			if !ok {
				t.Fatalf("%s is not an instances body", c.body)
			}
			req, err := q.Decode(context.Background(), "m", cfg, Options{MaxInputSize: 1 << 20})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if got := status(err); got != c.status {
					t.Errorf("status %d, want %d", got, c.status)
				}
				return
			}
			must(t, err)
			if len(req.Inputs) != len(c.want) {
				t.Fatalf("%d inputs, want %d", len(req.Inputs), len(c.want))
			}
			for i, w := range c.want {
				got := req.Inputs[i]
				if got.Name != w.name || !slices.Equal(got.Shape, w.shape) || !bytes.Equal(got.Data, w.data) || got.Data == nil {
					t.Errorf("input %d: %s %v %v, want %s %v %v", i, got.Name, got.Shape, got.Data, w.name, w.shape, w.data)
				}
			}
			if c.check != nil {
				c.check(t, req)
			}
		})
	}
}

// status is the HTTP status writeError answers err with.
func status(err error) int {
	if errors.As(err, new(*Error)) {
		return 400
	}
	return protocol.HTTPStatus(protocol.ClassOf(err))
}

// TestDecodeSizeLimit: a JSON input's tensor is bounded by
// --http-max-input-size as a v2 body's is.
func TestDecodeSizeLimit(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP64 dims: [ -1 ] }, { name: "B" data_type: TYPE_STRING dims: [ -1 ] optional: true } ]`))
	must(t, err)
	for _, c := range []struct {
		body string
		err  string
	}{
		{`{"instances":[{"A":[1,2]}]}`, ""},
		{`{"instances":[{"A":[1,2,3]}]}`, "JSON input 'A' has a byte_size (24 bytes) that exceeds the maximum allowed value of 16 bytes"},
		{`{"instances":[{"A":[1],"B":["12345678","9"]}]}`, "JSON input 'B' has a byte_size (17 bytes) that exceeds the maximum allowed value of 16 bytes"},
	} {
		q, _ := Parse([]byte(c.body))
		_, err := q.Decode(context.Background(), "m", cfg, Options{MaxInputSize: 16})
		if (c.err == "" && err != nil) || (c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || status(err) != 400)) {
			t.Errorf("%s: %v, want %q", c.body, err, c.err)
		}
	}
}

// TestAppendPredictions renders outputs straight from core tensors.
func TestAppendPredictions(t *testing.T) {
	i32 := func(name string, shape []int64, vs ...int32) *core.Tensor {
		return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: shape, Data: le(slices.Clone(vs))}
	}
	for _, c := range []struct {
		name     string
		outs     []*core.Tensor
		n        int
		batching bool
		want     string
		err      string
		status   int
	}{
		{name: "rows", outs: []*core.Tensor{i32("O", []int64{2, 2}, 1, 2, 3, 4)}, n: 2, batching: true,
			want: `{"predictions":[[1,2],[3,4]]}`},
		{name: "nested rows", outs: []*core.Tensor{i32("O", []int64{1, 2, 1}, 5, 6)}, n: 1, batching: true,
			want: `{"predictions":[[[5],[6]]]}`},
		{name: "scalar rows", outs: []*core.Tensor{i32("O", []int64{3}, 7, 8, 9)}, n: 3, batching: true,
			want: `{"predictions":[7,8,9]}`},
		{name: "whole output without batching", outs: []*core.Tensor{i32("O", []int64{2, 2}, 1, 2, 3, 4)}, n: 1,
			want: `{"predictions":[[[1,2],[3,4]]]}`},
		{name: "several outputs", outs: []*core.Tensor{i32("A", []int64{2, 1}, 1, 2),
			{Name: "B\"", DataType: core.TypeBytes, Shape: []int64{2, 2}, Data: byteElems("x", "y,\"z", "", "\x01")}}, n: 2, batching: true,
			want: `{"predictions":[{"A":[1],"B\"":["x","y,\"z"]},{"A":[2],"B\"":["","\u0001"]}]}`},
		{name: "floats and bools", outs: []*core.Tensor{
			{Name: "F", DataType: core.TypeFP32, Shape: []int64{1, 2}, Data: le(float32(0.1), float32(math.Inf(1)))},
			{Name: "D", DataType: core.TypeFP64, Shape: []int64{1, 1}, Data: le(1e21)},
			{Name: "T", DataType: core.TypeBool, Shape: []int64{1, 2}, Data: []byte{1, 0}}}, n: 1, batching: true,
			want: `{"predictions":[{"F":[0.10000000149011612,Infinity],"D":[1e21],"T":[true,false]}]}`},
		{name: "no outputs", n: 2, batching: true, want: `{"predictions":[{},{}]}`},

		{name: "first dimension", outs: []*core.Tensor{i32("O", []int64{1, 2}, 1, 2)}, n: 2, batching: true,
			err: "output 'O' has shape [1 2]: its first dimension must be the 2 instances", status: 500},
		{name: "data short of the shape", outs: []*core.Tensor{i32("O", []int64{2, 2}, 1, 2, 3)}, n: 2, batching: true,
			err: "output tensor shape does not match size of output for 'O'", status: 500},
		{name: "BYTES short of the shape", outs: []*core.Tensor{{Name: "S", DataType: core.TypeBytes, Shape: []int64{1, 2}, Data: byteElems("x")}}, n: 1, batching: true,
			err: "output tensor shape does not match size of output for 'S'", status: 500},
		{name: "FP16", outs: []*core.Tensor{{Name: "H", DataType: core.TypeFP16, Shape: []int64{1, 1}, Data: []byte{0, 0}}}, n: 1, batching: true,
			err: "sending FP16 data via JSON is not supported", status: 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := AppendPredictions([]byte(`{"predictions":`), c.outs, c.n, c.batching)
			got = append(got, '}')
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if s := status(err); s != c.status {
					t.Errorf("status %d, want %d", s, c.status)
				}
				return
			}
			must(t, err)
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestDecodeNesting: a row's arrays count toward the nesting limit of a v2
// body's "data" (codec.MaxDataNesting), the "data" array included.
func TestDecodeNesting(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 4
input [ { name: "S" data_type: TYPE_BOOL dims: [ -1 ] } ]`))
	must(t, err)
	deep := func(n int, inner string) string {
		return `{"instances":[` + strings.Repeat("[", n) + inner + strings.Repeat("]", n) + `]}`
	}
	for _, c := range []struct {
		body    string
		tooDeep bool
	}{
		{deep(codec.MaxDataNesting-2, "true"), false},
		{deep(codec.MaxDataNesting-1, "true"), true},
		{deep(codec.MaxDataNesting-1, "[]"), false}, // no elements: the data is not read
		{deep(codec.MaxDataNesting, "true"), true},
	} {
		q, _ := Parse([]byte(c.body))
		_, err := q.Decode(context.Background(), "m", cfg, Options{MaxInputSize: 0})
		if got := err != nil && strings.Contains(err.Error(), "JSON nesting depth exceeds maximum allowed limit (100)") && status(err) == 400; got != c.tooDeep || (!c.tooDeep && err != nil) {
			t.Errorf("%d arrays: %v, want too deep %v", strings.Count(c.body, "[")-1, err, c.tooDeep)
		}
	}
}

// instancesWithParams is an instances body for id1 whose "parameters"
// object holds n members "<prefix><i>":<i>, then tail.
func instancesWithParams(n int, prefix, tail string) []byte {
	b := append([]byte(`{"instances":[[1]],"parameters":{`), servertest.ParamMembers(n, prefix)...)
	return append(append(b, tail...), "}}"...)
}

// TestDecodeGivesUpWhenCancelled: decoding a large instances body stops
// with CodeCancelled once the client has gone; a small one is decoded.
func TestDecodeGivesUpWhenCancelled(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 0
input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]`))
	must(t, err)
	batched, err := modelconfig.Parse([]byte(`max_batch_size: 100000
input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]`))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		cfg  *modelconfig.ModelConfig
		body string
	}{
		{"parameters", cfg, string(instancesWithParams(20000, "p", ""))},
		{"instances", batched, `{"instances":[` + strings.Repeat(`{"A":[1]},`, 20000) + `{"A":[1]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := Parse([]byte(tc.body))
			if !ok {
				t.Fatal("not an instances body")
			}
			if _, err := q.Decode(context.Background(), "m", tc.cfg, Options{MaxInputSize: 1 << 30}); err != nil {
				t.Fatalf("live decode: %v", err)
			}
			if _, err := q.Decode(ctx, "m", tc.cfg, Options{MaxInputSize: 1 << 30}); core.CodeOf(err) != core.CodeCancelled {
				t.Fatalf("cancelled decode: %v", err)
			}
		})
	}
	q, _ := Parse([]byte(`{"instances":[[1]],"parameters":{"p":1}}`))
	if _, err := q.Decode(ctx, "m", cfg, Options{MaxInputSize: 1 << 30}); err != nil {
		t.Fatalf("small body: %v", err)
	}
}

// TestReadManyParams: a large parameters object reads as a small one
// does: every model parameter once, names cut at a NUL finding the first
// member of their prefix, and no map when none is a model parameter.
func TestReadManyParams(t *testing.T) {
	nul := make([]string, 100)
	for i := range nul {
		nul[i] = `"priority\u0000` + strconv.Itoa(i) + `":"x"`
	}
	for _, tc := range []struct {
		name, body string
		check      func(*core.InferRequest) bool
	}{
		{"distinct names", string(instancesWithParams(100, "p", "")),
			func(r *core.InferRequest) bool { return len(r.Parameters) == 100 && r.Parameters["p99"] == int64(99) }},
		{"none a model parameter", `{"instances":[[1]],"parameters":{"priority":3,` + strings.Join(nul, ",") + `}}`,
			func(r *core.InferRequest) bool { return r.Parameters == nil && r.Priority == 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := Parse([]byte(tc.body))
			if !ok {
				t.Fatal("not an instances body")
			}
			req := &core.InferRequest{}
			if err := readParams(context.Background(), req, q.Params); err != nil || !tc.check(req) {
				t.Fatalf("%v: %+v", err, req)
			}
		})
	}
}

// TestSkipUnknown: with Options.SkipUnknown (SageMaker's records) a member
// that names no input is left out; without it, it fails as UnknownInput.
func TestSkipUnknown(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 2 ] } ]`))
	must(t, err)
	q, ok := Parse([]byte(`{"instances":[{"A":[1,2],"id":7},{"id":8,"A":[3,4]}]}`))
	if !ok {
		t.Fatal("not an instances body")
	}
	req, err := q.Decode(context.Background(), "m", cfg, Options{SkipUnknown: true})
	must(t, err)
	if len(req.Inputs) != 1 || !bytes.Equal(req.Inputs[0].Data, le(int32(1), int32(2), int32(3), int32(4))) {
		t.Errorf("inputs %+v", req.Inputs)
	}
	_, err = q.Decode(context.Background(), "m", cfg, Options{})
	var ie *Error
	if !errors.As(err, &ie) || ie.Kind != UnknownInput || ie.Input != "id" || ie.Instance != 0 {
		t.Errorf("error %v, want UnknownInput 'id' in instance 0", err)
	}
}

// TestErrorFacts: a mapping failure carries what a cloud words it from.
func TestErrorFacts(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 1 ] } ]`))
	must(t, err)
	for _, c := range []struct {
		body  string
		want  Error
		lacks string
	}{
		{`{"instances":[{"A":[1],"B":[1]},{"A":[2]}]}`, Error{Kind: InputsDiffer, Instance: 1, Named: []string{"A"}, FirstNamed: []string{"A", "B"}}, "B"},
		{`{"instances":[{"A":[1],"B":[1]},{"A":[1,2],"B":[1]}]}`, Error{Kind: ShapeMismatch, Instance: 1, Input: "A", Shape: []int64{2}, First: []int64{1}}, ""},
		{`{"instances":[{"A":[1]}]}`, Error{Kind: MissingInput, Input: "B"}, ""},
	} {
		q, _ := Parse([]byte(c.body))
		_, err := q.Decode(context.Background(), "m", cfg, Options{})
		var ie *Error
		if !errors.As(err, &ie) || ie.Kind != c.want.Kind || ie.Instance != c.want.Instance || ie.Input != c.want.Input ||
			!slices.Equal(ie.Shape, c.want.Shape) || !slices.Equal(ie.First, c.want.First) ||
			!slices.Equal(ie.Named, c.want.Named) || !slices.Equal(ie.FirstNamed, c.want.FirstNamed) || ie.Lacks() != c.lacks ||
			ie.Model != "m" || !slices.Equal(ie.Inputs, []string{"A", "B"}) {
			t.Errorf("%s: %#v, want %#v lacking %q", c.body, ie, c.want, c.lacks)
		}
	}
}

// TestNextElements: a prediction's elements, output by output, as JSON
// text.
func TestNextElements(t *testing.T) {
	outs := []*core.Tensor{
		{Name: "A", DataType: core.TypeInt32, Shape: []int64{2, 2}, Data: le(int32(1), int32(2), int32(3), int32(4))},
		{Name: "B", DataType: core.TypeBytes, Shape: []int64{2}, Data: byteElems("x", "y\"")},
	}
	p, err := NewPredictions(outs, 2, true)
	must(t, err)
	var got []string
	for range p.Len() {
		must(t, p.NextElements(func(e []byte) { got = append(got, string(e)) }))
		got = append(got, "|")
	}
	if want := []string{"1", "2", `"x"`, "|", "3", "4", `"y\""`, "|"}; !slices.Equal(got, want) {
		t.Errorf("elements %q, want %q", got, want)
	}
}
