package onnxbuild

import (
	"fmt"
	"math"
	"slices"
)

// Ready-made models. Each takes the element type and dims of its tensors
// (-1 for a symbolic dimension, as in Graph.Input), returns the .onnx bytes,
// and rejects element types its operators cannot take on ORT's CPU provider.
// The type lists below were checked against ORT 1.29; the tests load every
// listed type into ORT and compute with it.

// AddSubTypes are the element types AddSub and ThreeOutputs accept. Missing:
// BOOL and STRING (no ONNX Add for them), BFLOAT16 (ONNX allows it, but ORT's
// CPU provider has no kernel: "Could not find an implementation for Add").
var AddSubTypes = []DataType{
	Float, Uint8, Int8, Uint16, Int16, Int32, Int64, Float16, Double, Uint32, Uint64,
}

// MatMulTypes are the element types MatMul accepts. ONNX MatMul has no 8/16-bit
// integer, BOOL or STRING variant; ORT's CPU provider has no BFLOAT16 kernel.
var MatMulTypes = []DataType{Float, Int32, Int64, Float16, Double, Uint32, Uint64}

// addOpset is the ai.onnx opset for models built on Add/Sub with elem: the
// default, except for the 8- and 16-bit integers that Add and Sub only accept
// from opset 14 on.
func addOpset(elem DataType) int64 {
	switch elem {
	case Uint8, Int8, Uint16, Int16:
		return 14
	}
	return DefaultOpset
}

func checkType(model string, elem DataType, allowed []DataType) error {
	if !slices.Contains(allowed, elem) {
		return fmt.Errorf("onnxbuild: %s: element type %v not supported (want one of %v)", model, elem, allowed)
	}
	return nil
}

// AddSub is the model behind Triton's quickstart "simple": inputs INPUT0 and
// INPUT1, outputs OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, all
// of type elem and shape dims (so "simple" is AddSub(Int32, -1, 16)). elem
// must be in AddSubTypes; the model uses opset 13, or 14 for 8- and 16-bit
// integers.
func AddSub(elem DataType, dims ...int64) ([]byte, error) {
	if err := checkType("AddSub", elem, AddSubTypes); err != nil {
		return nil, err
	}
	g := NewGraph("add_sub")
	g.Input("INPUT0", elem, dims...)
	g.Input("INPUT1", elem, dims...)
	g.Output("OUTPUT0", elem, dims...)
	g.Output("OUTPUT1", elem, dims...)
	g.Node("Add", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0"})
	g.Node("Sub", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT1"})
	return Model(g, addOpset(elem))
}

// Identity copies INPUT0 to OUTPUT0 (shape dims). It takes every element type
// in AllTypes, STRING, BOOL, FLOAT16 and BFLOAT16 included.
func Identity(elem DataType, dims ...int64) ([]byte, error) {
	g := NewGraph("identity")
	g.Input("INPUT0", elem, dims...)
	g.Output("OUTPUT0", elem, dims...)
	g.Node("Identity", []string{"INPUT0"}, []string{"OUTPUT0"})
	return Model(g, DefaultOpset)
}

// MatMul multiplies input x [batch, k] by a constant weight initializer W
// [k, n] (values from MatMulWeights) into output y [batch, n]. batch is
// normally -1. elem must be in MatMulTypes.
func MatMul(elem DataType, batch, k, n int64) ([]byte, error) {
	if err := checkType("MatMul", elem, MatMulTypes); err != nil {
		return nil, err
	}
	if k <= 0 || n <= 0 {
		return nil, fmt.Errorf("onnxbuild: MatMul: k=%d n=%d, want both > 0", k, n)
	}
	w, err := Encode(elem, MatMulWeights(k, n))
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: MatMul weights: %w", err)
	}
	g := NewGraph("matmul")
	g.Input("x", elem, batch, k)
	g.Output("y", elem, batch, n)
	g.Initializer("W", elem, []int64{k, n}, w)
	g.Node("MatMul", []string{"x", "W"}, []string{"y"})
	return Model(g, DefaultOpset)
}

// MatMulWeights are the row-major [k, n] weights baked into MatMul:
// W[i][j] = (i*n + j) % 7 + 1. Small positive integers, so they are exact in
// every MatMulTypes type and the products stay exact in FLOAT16 for small
// inputs; not symmetric, so a transposed matrix shows.
func MatMulWeights(k, n int64) []float64 {
	w := make([]float64, k*n)
	for i := range w {
		w[i] = float64(i%7 + 1)
	}
	return w
}

// ThreeOutputs has one input INPUT0 and three outputs declared in the graph in
// the order OUTPUT2, OUTPUT0, OUTPUT1, where OUTPUTk = INPUT0 + k. It is for
// testing that outputs are matched by name, not position or sorting: the
// offsets make every output distinguishable. elem must be in AddSubTypes.
func ThreeOutputs(elem DataType, dims ...int64) ([]byte, error) {
	if err := checkType("ThreeOutputs", elem, AddSubTypes); err != nil {
		return nil, err
	}
	g := NewGraph("three_outputs")
	g.Input("INPUT0", elem, dims...)
	for _, k := range []int{2, 0, 1} {
		g.Output(fmt.Sprintf("OUTPUT%d", k), elem, dims...)
	}
	for k := range 3 {
		c, err := Encode(elem, []float64{float64(k)})
		if err != nil {
			return nil, fmt.Errorf("onnxbuild: ThreeOutputs: %w", err)
		}
		name := fmt.Sprintf("offset%d", k)
		g.Initializer(name, elem, nil, c) // scalar, broadcast by Add
		g.Node("Add", []string{"INPUT0", name}, []string{fmt.Sprintf("OUTPUT%d", k)})
	}
	return Model(g, addOpset(elem))
}

// Cast converts INPUT0 of type from into OUTPUT0 of type to (shape dims),
// with ONNX Cast semantics (e.g. STRING parses or prints numbers). It gives
// models whose output type differs from the input's, such as a FLOAT16 output
// from a FLOAT input.
func Cast(from, to DataType, dims ...int64) ([]byte, error) {
	if !to.Valid() {
		return nil, fmt.Errorf("onnxbuild: Cast: invalid target type %v", to)
	}
	g := NewGraph("cast")
	g.Input("INPUT0", from, dims...)
	g.Output("OUTPUT0", to, dims...)
	g.Node("Cast", []string{"INPUT0"}, []string{"OUTPUT0"}, AttrInt("to", int64(to)))
	return Model(g, DefaultOpset)
}

// MLP is a multilayer perceptron for compute-bound benchmarks: FLOAT input x
// [batch, in] (batch symbolic), FLOAT output y [batch, hidden], and layers
// fully connected layers h = h·W_l + b_l with weights W_l [k, hidden] (k is
// in for the first layer, hidden after) and biases b_l [hidden] from
// MLPWeights and MLPBias. A Relu follows every layer but the last. One
// execution costs about 2·batch·hidden·(in + (layers-1)·hidden) flops.
func MLP(in, hidden, layers int64) ([]byte, error) {
	if in <= 0 || hidden <= 0 || layers <= 0 {
		return nil, fmt.Errorf("onnxbuild: MLP: in=%d hidden=%d layers=%d, want all > 0", in, hidden, layers)
	}
	g := NewGraph("mlp")
	g.Input("x", Float, -1, in)
	g.Output("y", Float, -1, hidden)
	h := "x"
	for l := range layers {
		k := hidden
		if l == 0 {
			k = in
		}
		w, err := Encode(Float, MLPWeights(l, k, hidden))
		if err != nil {
			return nil, fmt.Errorf("onnxbuild: MLP weights: %w", err)
		}
		bias, err := Encode(Float, MLPBias(l, hidden))
		if err != nil {
			return nil, fmt.Errorf("onnxbuild: MLP bias: %w", err)
		}
		wName, bName := fmt.Sprintf("W%d", l), fmt.Sprintf("b%d", l)
		g.Initializer(wName, Float, []int64{k, hidden}, w)
		g.Initializer(bName, Float, []int64{hidden}, bias)
		mm, sum := fmt.Sprintf("mm%d", l), fmt.Sprintf("h%d", l)
		if l == layers-1 {
			sum = "y"
		}
		g.Node("MatMul", []string{h, wName}, []string{mm})
		g.Node("Add", []string{mm, bName}, []string{sum})
		h = sum
		if l < layers-1 {
			g.Node("Relu", []string{sum}, []string{sum + "_relu"})
			h = sum + "_relu"
		}
	}
	return Model(g, DefaultOpset)
}

// MLPWeights are the row-major [k, n] weights of MLP layer l: a fixed
// pseudo-random pattern of multiples of 1/64 in [-1, 1), scaled by 1/√k so
// that activations stay of order one through any number of layers. Every
// value is exact in FLOAT.
func MLPWeights(l, k, n int64) []float64 {
	w := make([]float64, k*n)
	scale := 1 / math.Sqrt(float64(k))
	for i := range w {
		h := uint32(int64(i)*2654435761+l*40503) >> 7
		w[i] = float64(float32(float64(int64(h%128)-64) / 64 * scale))
	}
	return w
}

// MLPBias is the bias of MLP layer l: small values in [-0.02, 0.02].
func MLPBias(l, n int64) []float64 {
	b := make([]float64, n)
	for j := range b {
		b[j] = float64(float32(float64((int64(j)+l)%5-2) / 100))
	}
	return b
}

// TextClassifier is a stand-in for the `text_classifier` of Triton's user
// guide: INT64 inputs input_ids and attention_mask [-1, seqLen], FP32
// output logits [-1, 2] = float(input_ids · attention_mask) × W, with W
// from TextClassifierWeights.
func TextClassifier(seqLen int64) ([]byte, error) {
	g := NewGraph("text_classifier")
	g.Input("input_ids", Int64, -1, seqLen)
	g.Input("attention_mask", Int64, -1, seqLen)
	g.Output("logits", Float, -1, 2)
	w, err := Encode(Float, TextClassifierWeights(seqLen))
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: TextClassifier weights: %w", err)
	}
	g.Initializer("W", Float, []int64{seqLen, 2}, w)
	g.Node("Mul", []string{"input_ids", "attention_mask"}, []string{"masked"})
	g.Node("Cast", []string{"masked"}, []string{"masked_f"}, AttrInt("to", int64(Float)))
	g.Node("MatMul", []string{"masked_f", "W"}, []string{"logits"})
	return Model(g, DefaultOpset)
}

// TextClassifierWeights is TextClassifier's row-major [seqLen, 2] W: 1 in
// the first column, i mod 3 in the second.
func TextClassifierWeights(seqLen int64) []float64 {
	w := make([]float64, 2*seqLen)
	for i := range seqLen {
		w[2*i], w[2*i+1] = 1, float64(i%3)
	}
	return w
}
