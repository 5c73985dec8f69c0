package core

import (
	"slices"
	"strings"
	"testing"

	"github.com/inferd/inferd/repo/modelconfig"
)

func mustConfig(t *testing.T, text string) *modelconfig.ModelConfig {
	t.Helper()
	cfg, err := modelconfig.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func i32(n int) []byte { return make([]byte, 4*n) }

func TestPrepare(t *testing.T) {
	simple := newModelVersion("simple", 1, mustConfig(t, `max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]`))
	reshaped := newModelVersion("r", 1, mustConfig(t, `max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape: { shape: [ -1, 2 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]`))
	raw := newModelVersion("raw", 1, mustConfig(t, `max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, -1 ] } ]`))
	rawBytes := newModelVersion("rawb", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "s" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_STRING dims: [ 1 ] } ]`))
	optional := newModelVersion("opt", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "a" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "b" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`))
	anyLen := newModelVersion("any", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]`))
	anyLen2 := newModelVersion("any2", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]`))
	anyLenBytes := newModelVersion("anyb", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "s" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_STRING dims: [ -1 ] } ]`))
	rawHuge := newModelVersion("rawh", 1, mustConfig(t, `max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4611686018427387904, -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]`))

	in := func(name string, dt DataType, shape []int64, data []byte) *Tensor {
		return &Tensor{Name: name, DataType: dt, Shape: shape, Data: data}
	}
	cases := []struct {
		name      string
		mv        *ModelVersion
		req       *InferRequest
		wantErr   string
		wantShape []int64 // first backend input's shape
		wantOuts  []string
		wantBatch uint64
	}{
		{name: "valid, outputs in name order", mv: simple, req: &InferRequest{Inputs: []*Tensor{in("INPUT1", TypeInt32, []int64{2, 16}, i32(32)), in("INPUT0", TypeInt32, []int64{2, 16}, i32(32))}},
			wantShape: []int64{2, 16}, wantOuts: []string{"OUTPUT0", "OUTPUT1"}, wantBatch: 2},
		{name: "byte size mismatch", mv: simple, req: &InferRequest{ID: "7", Inputs: []*Tensor{in("INPUT0", TypeInt32, []int64{1, 16}, i32(15)), in("INPUT1", TypeInt32, []int64{1, 16}, i32(16))}},
			wantErr: "[request id: 7] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"},
		{name: "no batch dim", mv: simple, req: &InferRequest{Inputs: []*Tensor{in("INPUT0", TypeInt32, nil, nil), in("INPUT1", TypeInt32, []int64{1, 16}, i32(16))}},
			wantErr: "input 'INPUT0' has no shape but model requires batch dimension for 'simple'"},
		{name: "duplicate input", mv: simple, req: &InferRequest{Inputs: []*Tensor{in("INPUT0", TypeInt32, []int64{1, 16}, i32(16)), in("INPUT0", TypeInt32, []int64{1, 16}, i32(16))}},
			wantErr: "expected 2 inputs but got 2 inputs"},
		{name: "reshape fills -1 in order", mv: reshaped, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{3, 2, 5}, make([]byte, 4*30))}},
			wantShape: []int64{3, 5, 2}, wantOuts: []string{"y"}, wantBatch: 3},
		{name: "raw request deduces the variable dim", mv: raw, req: &InferRequest{Raw: true, Inputs: []*Tensor{{Data: make([]byte, 4*2*5)}}},
			wantShape: []int64{1, 2, 5}, wantOuts: []string{"y"}, wantBatch: 1},
		{name: "raw BYTES needs shape [1]", mv: rawBytes, req: &InferRequest{Raw: true, Inputs: []*Tensor{{Data: []byte("hello")}}},
			wantShape: []int64{1}, wantOuts: []string{"y"}},
		{name: "optional input may be left out", mv: optional, req: &InferRequest{Inputs: []*Tensor{in("a", TypeInt32, []int64{1}, i32(1))}},
			wantShape: []int64{1}, wantOuts: []string{"y"}},
		{name: "required input missing", mv: optional, req: &InferRequest{Inputs: []*Tensor{in("b", TypeInt32, []int64{1}, i32(1))}},
			wantErr: "expected number of inputs between 1 and 2 but got 1 inputs for model 'opt'. Got input(s) ['b'], but missing required input(s) ['a']."},
		{name: "non-batching rank mismatch has no NOTE", mv: optional, req: &InferRequest{Inputs: []*Tensor{in("a", TypeInt32, []int64{1, 1}, i32(1))}},
			wantErr: "unexpected shape for input 'a' for model 'opt'. Expected [1], got [1,1]."},
		// Shape products and their byte sizes never wrap: 2^62 FP32
		// elements are 2^64 bytes, not 0.
		{name: "byte size wraps to 0", mv: anyLen, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{1 << 62}, []byte{})}},
			wantErr: "byte size overflow for input 'x': element count 4611686018427387904 times element size 4 exceeds maximum size of 9223372036854775807"},
		{name: "byte size wraps to 4", mv: anyLen, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{1<<62 + 1}, i32(1))}},
			wantErr: "byte size overflow for input 'x'"},
		{name: "byte size wraps negative", mv: anyLen, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{1 << 61}, nil)}},
			wantErr: "byte size overflow for input 'x'"},
		{name: "element count overflows", mv: anyLen2, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{1 << 32, 1 << 32}, nil)}},
			wantErr: "invalid shape for input 'x': shape [4294967296,4294967296] causes total element count to exceed maximum size of 9223372036854775807"},
		{name: "BYTES count is not a byte size", mv: anyLenBytes, req: &InferRequest{Inputs: []*Tensor{in("s", TypeBytes, []int64{1 << 62}, []byte{})}},
			wantErr: "expected 4611686018427387904 string elements for inference input 's' for model 'anyb', got 0"},
		{name: "negative dim", mv: anyLen, req: &InferRequest{Inputs: []*Tensor{in("x", TypeFP32, []int64{-4}, nil)}},
			wantErr: "All input dimensions should be specified for input 'x'"},
		{name: "raw request over a huge fixed dim deduces nothing", mv: rawHuge, req: &InferRequest{Raw: true, Inputs: []*Tensor{{Data: i32(4)}}},
			wantErr: "All input dimensions should be specified for input 'x'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r ExecRequest
			err := c.mv.prepare(c.req, &r)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				if CodeOf(err) != CodeInvalidArg {
					t.Errorf("code = %v", CodeOf(err))
				}
				if strings.Contains(c.wantErr, "[-1") != strings.Contains(err.Error(), "NOTE:") {
					t.Errorf("NOTE sentence only for batching models: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Inputs[0].Shape, c.wantShape) || !slices.Equal(r.Outputs, c.wantOuts) || r.BatchSize != c.wantBatch {
				t.Fatalf("shape %v outs %v batch %d", r.Inputs[0].Shape, r.Outputs, r.BatchSize)
			}
		})
	}
	if got := CountBytesElements(rawBytesData(t, rawBytes)); got != 1 {
		t.Errorf("raw BYTES element count %d", got)
	}
}

func rawBytesData(t *testing.T, mv *ModelVersion) []byte {
	req := &InferRequest{Raw: true, Inputs: []*Tensor{{Data: []byte("abc")}}}
	var r ExecRequest
	err := mv.prepare(req, &r)
	if err != nil {
		t.Fatal(err)
	}
	return r.Inputs[0].Data
}

func TestResponseShape(t *testing.T) {
	out := &modelconfig.ModelOutput{Name: "y", Dims: []int64{1}, Reshape: &modelconfig.ModelTensorReshape{}}
	if got := responseShape(out, []int64{3}, true); !slices.Equal(got, []int64{3, 1}) {
		t.Errorf("got %v, want [3 1]", got)
	}
	out = &modelconfig.ModelOutput{Name: "y", Dims: []int64{2, -1}, Reshape: &modelconfig.ModelTensorReshape{Shape: []int64{-1}}}
	if got := responseShape(out, []int64{4, 10}, true); !slices.Equal(got, []int64{4, 2, 5}) {
		t.Errorf("got %v, want [4 2 5]", got)
	}
	// A produced shape whose product overflows leaves the -1 as it is.
	if got := responseShape(out, []int64{4, 1 << 62, 4}, true); !slices.Equal(got, []int64{4, 2, -1}) {
		t.Errorf("overflowing product: got %v, want [4 2 -1]", got)
	}
}

func TestDataTypes(t *testing.T) {
	for dt := TypeBool; dt <= TypeBF16; dt++ {
		if ParseDataType(dt.String()) != dt || ParseConfigDataType(dt.ConfigName()) != dt {
			t.Errorf("%v does not round-trip (%s, %s)", dt, dt.String(), dt.ConfigName())
		}
		if dt != TypeBytes && dt.ByteSize() == 0 {
			t.Errorf("%v has no size", dt)
		}
		if modelconfig.DataType(dt).String() != dt.ConfigName() {
			t.Errorf("%v: config enum %s vs %s", dt, modelconfig.DataType(dt), dt.ConfigName())
		}
	}
	for _, bad := range []string{"STRING", "fp32", "", "TYPE_FP32"} {
		if ParseDataType(bad) != TypeInvalid {
			t.Errorf("ParseDataType(%q) accepted", bad)
		}
	}
	if ElementCount(nil) != 0 || ElementCount([]int64{2, 0, 3}) != 0 || ElementCount([]int64{2, 3}) != 6 || ElementCount([]int64{1 << 62, 4}) != -1 {
		t.Error("ElementCount")
	}
}
