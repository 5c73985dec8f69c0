package onnxbuild

// These tests load every ready-made model into the real ONNX Runtime: a model
// that only parses as protobuf proves nothing about what ORT accepts.

import (
	"fmt"
	"math"
	"slices"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/internal/onnxbuild/orttest"
)

// tensor describes a model input or output: for io info, shape may hold -1;
// for a run, nums (numeric types) or strs (STRING) hold the elements.
type tensor struct {
	name  string
	elem  DataType
	shape []int64
	nums  []float64
	strs  []string
}

func (x tensor) count() int64 {
	n := int64(1)
	for _, d := range x.shape {
		n *= d
	}
	return n
}

// checkInfo compares what ORT reports for the model's inputs and outputs.
func checkInfo(t *testing.T, model []byte, wantIn, wantOut []tensor) {
	t.Helper()
	ins, outs, err := ort.GetInputOutputInfoWithONNXData(model)
	if err != nil {
		t.Fatalf("ORT rejected the model: %v", err)
	}
	compare := func(kind string, got []ort.InputOutputInfo, want []tensor) {
		if len(got) != len(want) {
			t.Fatalf("%d %ss, want %d: %v", len(got), kind, len(want), got)
		}
		for i, w := range want {
			g := got[i]
			if g.Name != w.name || g.OrtValueType != ort.ONNXTypeTensor ||
				g.DataType != ort.TensorElementDataType(w.elem) || !slices.Equal(g.Dimensions, w.shape) {
				t.Errorf("%s %d = %v; want %q %v %v", kind, i, &g, w.name, w.elem, w.shape)
			}
		}
	}
	compare("input", ins, wantIn)
	compare("output", outs, wantOut)
}

func newValue(x tensor) (ort.Value, error) {
	if x.elem == String {
		v, err := ort.NewStringTensor(ort.NewShape(x.shape...))
		if err != nil {
			return nil, err
		}
		if err := v.SetContents(x.strs); err != nil {
			v.Destroy()
			return nil, err
		}
		return v, nil
	}
	raw, err := Encode(x.elem, x.nums)
	if err != nil {
		return nil, err
	}
	return ort.NewCustomDataTensor(ort.NewShape(x.shape...), raw, ort.TensorElementDataType(x.elem))
}

// run executes model once. outputs name the outputs to fetch (any order) with
// their element type and concrete shape; the returned copies carry the
// computed elements.
func run(t *testing.T, model []byte, inputs, outputs []tensor) []tensor {
	t.Helper()
	var inNames, outNames []string
	for _, x := range inputs {
		inNames = append(inNames, x.name)
	}
	for _, x := range outputs {
		outNames = append(outNames, x.name)
	}
	s, err := ort.NewDynamicAdvancedSessionWithONNXData(model, inNames, outNames, nil)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	defer s.Destroy()

	in := make([]ort.Value, len(inputs))
	for i, x := range inputs {
		if in[i], err = newValue(x); err != nil {
			t.Fatalf("input %s: %v", x.name, err)
		}
		defer in[i].Destroy()
	}
	// Numeric outputs are preallocated: onnxruntime_go v1.27.0 sizes
	// ORT-allocated FLOAT16/BFLOAT16 outputs by element count instead of bytes
	// and fails ("not enough space"). Strings cannot be preallocated.
	out := make([]ort.Value, len(outputs))
	for i, x := range outputs {
		if x.elem == String {
			continue
		}
		buf := make([]byte, x.count()*int64(x.elem.Size()))
		if out[i], err = ort.NewCustomDataTensor(ort.NewShape(x.shape...), buf, ort.TensorElementDataType(x.elem)); err != nil {
			t.Fatalf("output %s: %v", x.name, err)
		}
	}
	err = s.Run(in, out)
	for _, v := range out {
		if v != nil {
			defer v.Destroy()
		}
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	got := make([]tensor, len(outputs))
	for i, x := range outputs {
		got[i] = tensor{name: x.name, elem: x.elem, shape: out[i].GetShape()}
		switch v := out[i].(type) {
		case *ort.StringTensor:
			if got[i].strs, err = v.GetContents(); err != nil {
				t.Fatalf("output %s: %v", x.name, err)
			}
		case *ort.CustomDataTensor:
			if got[i].nums, err = Decode(x.elem, v.GetData()); err != nil {
				t.Fatalf("output %s: %v", x.name, err)
			}
		default:
			t.Fatalf("output %s: unexpected value %T", x.name, v)
		}
	}
	return got
}

// checkOutputs compares run results with want (matched by position).
func checkOutputs(t *testing.T, got, want []tensor) {
	t.Helper()
	for i, w := range want {
		g := got[i]
		if !slices.Equal([]int64(g.shape), w.shape) {
			t.Errorf("%s: shape %v, want %v", w.name, g.shape, w.shape)
		}
		if w.elem == String {
			if !slices.Equal(g.strs, w.strs) {
				t.Errorf("%s = %q, want %q", w.name, g.strs, w.strs)
			}
			continue
		}
		if !slices.EqualFunc(g.nums, w.nums, sameFloat) {
			t.Errorf("%s = %v, want %v", w.name, g.nums, w.nums)
		}
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func seq(n int, f func(i int) float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	return v
}

func isFloat(dt DataType) bool {
	return dt == Float || dt == Double || dt == Float16 || dt == BFloat16
}

func TestAddSubORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range AddSubTypes {
		t.Run(dt.String(), func(t *testing.T) {
			model, err := AddSub(dt, -1, 4)
			if err != nil {
				t.Fatal(err)
			}
			sym := []int64{-1, 4}
			checkInfo(t, model,
				[]tensor{{name: "INPUT0", elem: dt, shape: sym}, {name: "INPUT1", elem: dt, shape: sym}},
				[]tensor{{name: "OUTPUT0", elem: dt, shape: sym}, {name: "OUTPUT1", elem: dt, shape: sym}})

			// Kept positive and small so every type, unsigned and 8-bit too, is exact.
			frac := 0.0
			if isFloat(dt) {
				frac = 0.5
			}
			a := seq(8, func(i int) float64 { return float64(10+i) + frac })
			b := seq(8, func(i int) float64 { return float64(i % 5) })
			shape := []int64{2, 4}
			got := run(t, model,
				[]tensor{{name: "INPUT0", elem: dt, shape: shape, nums: a}, {name: "INPUT1", elem: dt, shape: shape, nums: b}},
				[]tensor{{name: "OUTPUT0", elem: dt, shape: shape}, {name: "OUTPUT1", elem: dt, shape: shape}})
			checkOutputs(t, got, []tensor{
				{name: "OUTPUT0", elem: dt, shape: shape, nums: seq(8, func(i int) float64 { return a[i] + b[i] })},
				{name: "OUTPUT1", elem: dt, shape: shape, nums: seq(8, func(i int) float64 { return a[i] - b[i] })},
			})
		})
	}
}

// TestSimpleORT runs Triton's quickstart "simple" model on the quickstart
// client's data: INPUT0 = 0..15, INPUT1 = all ones.
func TestSimpleORT(t *testing.T) {
	orttest.Init(t)
	model := Must(AddSub(Int32, -1, 16))
	shape := []int64{1, 16}
	in0 := seq(16, func(i int) float64 { return float64(i) })
	in1 := seq(16, func(int) float64 { return 1 })
	got := run(t, model,
		[]tensor{{name: "INPUT0", elem: Int32, shape: shape, nums: in0}, {name: "INPUT1", elem: Int32, shape: shape, nums: in1}},
		// Asked for in reverse: outputs are fetched by name.
		[]tensor{{name: "OUTPUT1", elem: Int32, shape: shape}, {name: "OUTPUT0", elem: Int32, shape: shape}})
	checkOutputs(t, got, []tensor{
		{name: "OUTPUT1", elem: Int32, shape: shape, nums: seq(16, func(i int) float64 { return float64(i - 1) })},
		{name: "OUTPUT0", elem: Int32, shape: shape, nums: seq(16, func(i int) float64 { return float64(i + 1) })},
	})
}

func TestIdentityORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range AllTypes {
		t.Run(dt.String(), func(t *testing.T) {
			model, err := Identity(dt, -1, 3)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, model,
				[]tensor{{name: "INPUT0", elem: dt, shape: []int64{-1, 3}}},
				[]tensor{{name: "OUTPUT0", elem: dt, shape: []int64{-1, 3}}})
			x := tensor{name: "INPUT0", elem: dt, shape: []int64{2, 3}}
			switch {
			case dt == String:
				// No NUL bytes: onnxruntime_go fills string tensors from C
				// strings, so an input "a\x00b" reaches ORT as "a".
				x.strs = []string{"", "a", "héllo", "tab\there", "  ", "last"}
			case dt == Bool:
				x.nums = []float64{1, 0, 0, 1, 1, 0}
			case isFloat(dt):
				x.nums = []float64{0.5, -1.25, 3, 100, -0.0078125, 7}
			default:
				x.nums = []float64{0, 1, 2, 100, 127, 42}
			}
			want := x
			want.name = "OUTPUT0"
			got := run(t, model, []tensor{x}, []tensor{{name: "OUTPUT0", elem: dt, shape: x.shape}})
			checkOutputs(t, got, []tensor{want})
		})
	}
}

// TestIdentityShapesORT covers the dims forms: scalar, fixed, all symbolic.
func TestIdentityShapesORT(t *testing.T) {
	orttest.Init(t)
	tests := []struct {
		name      string
		dims, run []int64
	}{
		{"scalar", nil, nil},
		{"fixed", []int64{2, 3}, []int64{2, 3}},
		{"all symbolic", []int64{-1, -1}, []int64{3, 5}},
		{"symbolic inner", []int64{2, -1, 4}, []int64{2, 1, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := Must(Identity(Float, tt.dims...))
			checkInfo(t, model,
				[]tensor{{name: "INPUT0", elem: Float, shape: tt.dims}},
				[]tensor{{name: "OUTPUT0", elem: Float, shape: tt.dims}})
			if len(tt.run) == 0 {
				return // onnxruntime_go cannot make a rank-0 tensor to run with
			}
			x := tensor{name: "INPUT0", elem: Float, shape: tt.run}
			x.nums = seq(int(x.count()), func(i int) float64 { return float64(i) * 1.5 })
			want := x
			want.name = "OUTPUT0"
			checkOutputs(t, run(t, model, []tensor{x}, []tensor{{name: "OUTPUT0", elem: Float, shape: tt.run}}), []tensor{want})
		})
	}
}

func TestMatMulORT(t *testing.T) {
	orttest.Init(t)
	const k, n = 3, 4
	w := MatMulWeights(k, n)
	for _, dt := range MatMulTypes {
		for _, batch := range []int64{-1, 2} {
			t.Run(fmt.Sprintf("%v/batch=%d", dt, batch), func(t *testing.T) {
				model, err := MatMul(dt, batch, k, n)
				if err != nil {
					t.Fatal(err)
				}
				checkInfo(t, model,
					[]tensor{{name: "x", elem: dt, shape: []int64{batch, k}}},
					[]tensor{{name: "y", elem: dt, shape: []int64{batch, n}}})
				const rows = 2
				x := seq(rows*k, func(i int) float64 { return float64(i + 1) })
				want := make([]float64, rows*n)
				for r := range rows {
					for j := range n {
						for i := range k {
							want[r*n+j] += x[r*k+i] * w[i*n+j]
						}
					}
				}
				got := run(t, model,
					[]tensor{{name: "x", elem: dt, shape: []int64{rows, k}, nums: x}},
					[]tensor{{name: "y", elem: dt, shape: []int64{rows, n}}})
				checkOutputs(t, got, []tensor{{name: "y", elem: dt, shape: []int64{rows, n}, nums: want}})
			})
		}
	}
}

func TestMatMulWeights(t *testing.T) {
	got := MatMulWeights(2, 4)
	want := []float64{1, 2, 3, 4, 5, 6, 7, 1}
	if !slices.Equal(got, want) {
		t.Fatalf("MatMulWeights(2, 4) = %v, want %v", got, want)
	}
}

func TestThreeOutputsORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range AddSubTypes {
		t.Run(dt.String(), func(t *testing.T) {
			model, err := ThreeOutputs(dt, -1, 2)
			if err != nil {
				t.Fatal(err)
			}
			sym := []int64{-1, 2}
			checkInfo(t, model,
				[]tensor{{name: "INPUT0", elem: dt, shape: sym}},
				[]tensor{{name: "OUTPUT2", elem: dt, shape: sym}, {name: "OUTPUT0", elem: dt, shape: sym}, {name: "OUTPUT1", elem: dt, shape: sym}})
			shape := []int64{3, 2}
			x := seq(6, func(i int) float64 { return float64(i * 3) })
			var outs, want []tensor
			for k := range 3 {
				name := fmt.Sprintf("OUTPUT%d", k)
				outs = append(outs, tensor{name: name, elem: dt, shape: shape})
				want = append(want, tensor{name: name, elem: dt, shape: shape,
					nums: seq(6, func(i int) float64 { return x[i] + float64(k) })})
			}
			checkOutputs(t, run(t, model, []tensor{{name: "INPUT0", elem: dt, shape: shape, nums: x}}, outs), want)
		})
	}
}

func TestCastORT(t *testing.T) {
	orttest.Init(t)
	f16 := func(v float64) float64 { return float64(Float16ToFloat32(Float32ToFloat16(float32(v)))) }
	bf16 := func(v float64) float64 { return float64(BFloat16ToFloat32(Float32ToBFloat16(float32(v)))) }
	tests := []struct {
		from, to DataType
		in, out  tensor // only nums/strs are used
	}{
		{Float, Float16, tensor{nums: []float64{1, 0.1, 65504, 1e6}}, tensor{nums: []float64{1, f16(0.1), 65504, math.Inf(1)}}},
		{Float, BFloat16, tensor{nums: []float64{1, 0.1, -3.5, 3e38}}, tensor{nums: []float64{1, bf16(0.1), -3.5, bf16(3e38)}}},
		{Float16, Float, tensor{nums: []float64{1, -2, 0.5, 65504}}, tensor{nums: []float64{1, -2, 0.5, 65504}}},
		{BFloat16, Float, tensor{nums: []float64{1, -2, 0.5, 256}}, tensor{nums: []float64{1, -2, 0.5, 256}}},
		{Int32, Float, tensor{nums: []float64{-3, 7, 0, 1 << 24}}, tensor{nums: []float64{-3, 7, 0, 1 << 24}}},
		{Float, Int32, tensor{nums: []float64{2.7, -2.7, 0, 1e6}}, tensor{nums: []float64{2, -2, 0, 1e6}}},
		{Int32, Bool, tensor{nums: []float64{0, 5, -1, 0}}, tensor{nums: []float64{0, 1, 1, 0}}},
		{Bool, Float, tensor{nums: []float64{1, 0, 1, 1}}, tensor{nums: []float64{1, 0, 1, 1}}},
		{Uint8, Int64, tensor{nums: []float64{0, 1, 200, 255}}, tensor{nums: []float64{0, 1, 200, 255}}},
		{String, Float, tensor{strs: []string{"1.5", "-2", "1e3", "0"}}, tensor{nums: []float64{1.5, -2, 1000, 0}}},
		{String, Int32, tensor{strs: []string{"12", "-3", "0", "2147483647"}}, tensor{nums: []float64{12, -3, 0, math.MaxInt32}}},
		{Float, String, tensor{nums: []float64{1.5, -2, 0, 100}}, tensor{strs: []string{"1.5", "-2", "0", "100"}}},
		{Int64, String, tensor{nums: []float64{42, -7, 0, 1e15}}, tensor{strs: []string{"42", "-7", "0", "1000000000000000"}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v->%v", tt.from, tt.to), func(t *testing.T) {
			model, err := Cast(tt.from, tt.to, -1, 2)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, model,
				[]tensor{{name: "INPUT0", elem: tt.from, shape: []int64{-1, 2}}},
				[]tensor{{name: "OUTPUT0", elem: tt.to, shape: []int64{-1, 2}}})
			shape := []int64{2, 2}
			in := tensor{name: "INPUT0", elem: tt.from, shape: shape, nums: tt.in.nums, strs: tt.in.strs}
			want := tensor{name: "OUTPUT0", elem: tt.to, shape: shape, nums: tt.out.nums, strs: tt.out.strs}
			checkOutputs(t, run(t, model, []tensor{in}, []tensor{{name: "OUTPUT0", elem: tt.to, shape: shape}}), []tensor{want})
		})
	}
}

// TestInputWithDefaultORT builds a graph by hand: an input that also has an
// initializer (its default when the caller omits it) and a node attribute.
func TestInputWithDefaultORT(t *testing.T) {
	orttest.Init(t)
	g := NewGraph("defaults")
	g.Input("x", Float, 2)
	g.Input("bias", Float, 2)
	g.Initializer("bias", Float, []int64{2}, Must(Encode(Float, []float64{10, 20})))
	g.Output("y", Float, 2)
	g.Node("Add", []string{"x", "bias"}, []string{"sum"})
	g.Node("LeakyRelu", []string{"sum"}, []string{"y"}, AttrFloat("alpha", 0.5))
	model, err := Model(g, DefaultOpset)
	if err != nil {
		t.Fatal(err)
	}
	shape := []int64{2}
	x := tensor{name: "x", elem: Float, shape: shape, nums: []float64{-30, 1}}
	y := tensor{name: "y", elem: Float, shape: shape}
	checkOutputs(t, run(t, model, []tensor{x}, []tensor{y}),
		[]tensor{{name: "y", elem: Float, shape: shape, nums: []float64{-10, 21}}})
	bias := tensor{name: "bias", elem: Float, shape: shape, nums: []float64{0, 0}}
	checkOutputs(t, run(t, model, []tensor{x, bias}, []tensor{y}),
		[]tensor{{name: "y", elem: Float, shape: shape, nums: []float64{-15, 1}}})
}

func TestMLPORT(t *testing.T) {
	orttest.Init(t)
	const in, hidden, layers, rows = 5, 6, 3, 3
	model, err := MLP(in, hidden, layers)
	if err != nil {
		t.Fatal(err)
	}
	checkInfo(t, model,
		[]tensor{{name: "x", elem: Float, shape: []int64{-1, in}}},
		[]tensor{{name: "y", elem: Float, shape: []int64{-1, hidden}}})
	x := seq(rows*in, func(i int) float64 { return float64(i%7) - 3 })
	// Reference in float64; ORT computes in float32, hence the tolerance.
	h, k := x, int64(in)
	for l := range int64(layers) {
		w, bias := MLPWeights(l, k, hidden), MLPBias(l, hidden)
		next := make([]float64, rows*hidden)
		for r := range int64(rows) {
			for j := range int64(hidden) {
				v := bias[j]
				for i := range k {
					v += h[r*k+i] * w[i*hidden+j]
				}
				if l < layers-1 {
					v = max(v, 0)
				}
				next[r*hidden+j] = v
			}
		}
		h, k = next, hidden
	}
	got := run(t, model,
		[]tensor{{name: "x", elem: Float, shape: []int64{rows, in}, nums: x}},
		[]tensor{{name: "y", elem: Float, shape: []int64{rows, hidden}}})
	nonzero := 0
	for i, want := range h {
		if math.Abs(got[0].nums[i]-want) > 1e-4 {
			t.Fatalf("y[%d] = %v, want %v", i, got[0].nums[i], want)
		}
		if want != 0 {
			nonzero++
		}
	}
	if nonzero < len(h)/2 {
		t.Errorf("only %d of %d outputs nonzero: %v", nonzero, len(h), h)
	}
}

func TestMLPWeights(t *testing.T) {
	w := MLPWeights(0, 16, 16)
	var pos, neg int
	for _, v := range w {
		if math.Abs(v) > 1/math.Sqrt(16) || float64(float32(v)) != v {
			t.Fatalf("weight %v out of range or not exact in float32", v)
		}
		if v > 0 {
			pos++
		} else if v < 0 {
			neg++
		}
	}
	if pos < len(w)/4 || neg < len(w)/4 {
		t.Errorf("weights unbalanced: %d positive, %d negative of %d", pos, neg, len(w))
	}
	if slices.Equal(w, MLPWeights(1, 16, 16)) {
		t.Error("layers 0 and 1 have the same weights")
	}
}

// TestTextEncoderFFNORT: the feed-forward encoder against a float64
// reference: the lookup, then each block's residual h + W2·relu(W1·h + b1) + b2.
func TestTextEncoderFFNORT(t *testing.T) {
	orttest.Init(t)
	const vocab, hidden, ffn, layers, tokens = 7, 4, 8, 2, 3
	model, err := TextEncoderFFN(vocab, hidden, ffn, layers)
	if err != nil {
		t.Fatal(err)
	}
	ids, types := []float64{1, 5, 2}, []float64{0, 1, 1}
	table, typeTable := EncoderTable(vocab, hidden), EncoderTypeTable(hidden)
	h := make([]float64, tokens*hidden)
	for p := range tokens {
		for j := range hidden {
			h[p*hidden+j] = table[int(ids[p])*hidden+j] + typeTable[int(types[p])*hidden+j]
		}
	}
	dense := func(x []float64, k, n int64, w, b []float64, relu bool) []float64 {
		out := make([]float64, tokens*n)
		for p := range int64(tokens) {
			for j := range n {
				v := b[j]
				for i := range k {
					v += x[p*k+i] * w[i*n+j]
				}
				if relu {
					v = max(v, 0)
				}
				out[p*n+j] = v
			}
		}
		return out
	}
	for l := range int64(layers) {
		up := dense(h, hidden, ffn, MLPWeights(2*l, hidden, ffn), MLPBias(2*l, ffn), true)
		down := dense(up, ffn, hidden, MLPWeights(2*l+1, ffn, hidden), MLPBias(2*l+1, hidden), false)
		for i := range h {
			h[i] += down[i]
		}
	}
	got := run(t, model,
		[]tensor{{name: "input_ids", elem: Int64, shape: []int64{1, tokens}, nums: ids},
			{name: "attention_mask", elem: Int64, shape: []int64{1, tokens}, nums: []float64{1, 1, 1}},
			{name: "token_type_ids", elem: Int64, shape: []int64{1, tokens}, nums: types}},
		[]tensor{{name: "last_hidden_state", elem: Float, shape: []int64{1, tokens, hidden}}})
	for i, want := range h {
		if math.Abs(got[0].nums[i]-want) > 1e-4 {
			t.Fatalf("last_hidden_state[%d] = %v, want %v", i, got[0].nums[i], want)
		}
	}
}
