package onnxbuild

import (
	"fmt"
	"math"
)

// Text encoders: tiny BERT-like models for the OpenAI- and TEI-compatible
// routes (platforms/openai). Each takes INT64 input_ids, attention_mask and
// token_type_ids [-1, -1] (batch, tokens) and looks each token up in an
// embedding table: token embedding = Table[id] + TypeTable[type id], from
// EncoderTable and EncoderTypeTable, so a test computes the expected
// vectors itself. The token-embedding output ignores the mask, as a real
// encoder's does at padded positions: only pooling with the mask keeps
// padding out of a vector.

// encoderGraph adds the inputs and the token embeddings "emb" [B, L, H].
func encoderGraph(name string, vocab, hidden int64) (*Graph, error) {
	g := NewGraph(name)
	g.Input("input_ids", Int64, -1, -1)
	g.Input("attention_mask", Int64, -1, -1)
	g.Input("token_type_ids", Int64, -1, -1)
	table, err := Encode(Float, EncoderTable(vocab, hidden))
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: %s table: %w", name, err)
	}
	types, err := Encode(Float, EncoderTypeTable(hidden))
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: %s type table: %w", name, err)
	}
	g.Initializer("table", Float, []int64{vocab, hidden}, table)
	g.Initializer("type_table", Float, []int64{2, hidden}, types)
	g.Node("Gather", []string{"table", "input_ids"}, []string{"word"})
	g.Node("Gather", []string{"type_table", "token_type_ids"}, []string{"typed"})
	g.Node("Add", []string{"word", "typed"}, []string{"emb"})
	return g, nil
}

// maskedMean adds "pooled" [B, H]: the mean of emb over the positions whose
// attention_mask is 1.
func maskedMean(g *Graph) {
	axes, _ := Encode(Int64, []float64{1})
	unsq, _ := Encode(Int64, []float64{2})
	g.Initializer("axis1", Int64, []int64{1}, axes)
	g.Initializer("axis2", Int64, []int64{1}, unsq)
	g.Node("Cast", []string{"attention_mask"}, []string{"mask_f"}, AttrInt("to", int64(Float)))
	g.Node("Unsqueeze", []string{"mask_f", "axis2"}, []string{"mask3"})
	g.Node("Mul", []string{"emb", "mask3"}, []string{"masked"})
	g.Node("ReduceSum", []string{"masked", "axis1"}, []string{"sum"}, AttrInt("keepdims", 0))
	g.Node("ReduceSum", []string{"mask3", "axis1"}, []string{"count"}, AttrInt("keepdims", 0))
	g.Node("Div", []string{"sum", "count"}, []string{"pooled"})
}

// TextEncoder outputs the token embeddings, last_hidden_state
// [-1, -1, hidden]: the server pools them.
func TextEncoder(vocab, hidden int64) ([]byte, error) {
	g, err := encoderGraph("text_encoder", vocab, hidden)
	if err != nil {
		return nil, err
	}
	g.Output("last_hidden_state", Float, -1, -1, hidden)
	g.Node("Identity", []string{"emb"}, []string{"last_hidden_state"})
	return Model(g, DefaultOpset)
}

// TextEncoderPooled outputs sentence_embedding [-1, hidden], the masked
// mean of the token embeddings (pooled inside the model).
func TextEncoderPooled(vocab, hidden int64) ([]byte, error) {
	g, err := encoderGraph("text_encoder_pooled", vocab, hidden)
	if err != nil {
		return nil, err
	}
	maskedMean(g)
	g.Output("sentence_embedding", Float, -1, hidden)
	g.Node("Identity", []string{"pooled"}, []string{"sentence_embedding"})
	return Model(g, DefaultOpset)
}

// CrossEncoder outputs logits [-1, 1]: the masked mean of the token
// embeddings times CrossEncoderWeights, a cross-encoder's relevance logit
// (its pair's second text has type id 1, so it scores differently from
// the first).
func CrossEncoder(vocab, hidden int64) ([]byte, error) {
	g, err := encoderGraph("cross_encoder", vocab, hidden)
	if err != nil {
		return nil, err
	}
	maskedMean(g)
	w, err := Encode(Float, CrossEncoderWeights(hidden))
	if err != nil {
		return nil, fmt.Errorf("onnxbuild: CrossEncoder weights: %w", err)
	}
	g.Initializer("W", Float, []int64{hidden, 1}, w)
	g.Output("logits", Float, -1, 1)
	g.Node("MatMul", []string{"pooled", "W"}, []string{"logits"})
	return Model(g, DefaultOpset)
}

// EncoderTable is the row-major [vocab, hidden] embedding table:
// sin(1 + 0.7·id + 1.3·h), rounded to float32.
func EncoderTable(vocab, hidden int64) []float64 {
	t := make([]float64, vocab*hidden)
	for id := range vocab {
		for h := range hidden {
			t[id*hidden+h] = float64(float32(math.Sin(1 + 0.7*float64(id) + 1.3*float64(h))))
		}
	}
	return t
}

// EncoderTypeTable is the [2, hidden] token type table: 0 for type 0,
// 0.25 for type 1.
func EncoderTypeTable(hidden int64) []float64 {
	t := make([]float64, 2*hidden)
	for h := range hidden {
		t[hidden+h] = 0.25
	}
	return t
}

// CrossEncoderWeights is CrossEncoder's [hidden, 1] W: 1, -0.5, 0.25, ...
// (each the previous times -0.5).
func CrossEncoderWeights(hidden int64) []float64 {
	w := make([]float64, hidden)
	v := 1.0
	for h := range hidden {
		w[h] = v
		v *= -0.5
	}
	return w
}

// TextEncoderConfig is the config.pbtxt of an encoder named name with
// output out of per-row dims dims (max_batch_size 8, dynamic batching).
func TextEncoderConfig(name, out string, dims string) string {
	return fmt.Sprintf(`name: %q
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] }
]
output [ { name: %q data_type: TYPE_FP32 dims: %s } ]
dynamic_batching { }
instance_group [ { kind: KIND_CPU count: 1 } ]
`, name, out, dims)
}

// TextEncoderMLP is TextEncoder with compute behind the lookup, for
// benchmarks: layers fully connected hidden→hidden layers (MatMul, Add,
// Relu between them) applied to every token, weights from MLPWeights and
// MLPBias scaled as MLP's. Its output is last_hidden_state
// [-1, -1, hidden].
func TextEncoderMLP(vocab, hidden, layers int64) ([]byte, error) {
	g, err := encoderGraph("text_encoder_mlp", vocab, hidden)
	if err != nil {
		return nil, err
	}
	prev := "emb"
	for l := range layers {
		w, err := Encode(Float, MLPWeights(l, hidden, hidden))
		if err != nil {
			return nil, fmt.Errorf("onnxbuild: TextEncoderMLP weights: %w", err)
		}
		b, err := Encode(Float, MLPBias(l, hidden))
		if err != nil {
			return nil, fmt.Errorf("onnxbuild: TextEncoderMLP bias: %w", err)
		}
		wn, bn, mm, out := fmt.Sprintf("W%d", l), fmt.Sprintf("b%d", l), fmt.Sprintf("mm%d", l), fmt.Sprintf("h%d", l)
		g.Initializer(wn, Float, []int64{hidden, hidden}, w)
		g.Initializer(bn, Float, []int64{hidden}, b)
		g.Node("MatMul", []string{prev, wn}, []string{mm})
		if l == layers-1 {
			out = "last_hidden_state"
		}
		g.Node("Add", []string{mm, bn}, []string{out})
		prev = out
		if l < layers-1 {
			g.Node("Relu", []string{out}, []string{out + "_relu"})
			prev = out + "_relu"
		}
	}
	g.Output("last_hidden_state", Float, -1, -1, hidden)
	return Model(g, DefaultOpset)
}

// TextEncoderFFN is TextEncoder with a transformer's feed-forward blocks
// behind the lookup, for benchmarks that need an encoder's cost per token
// without attention: each of layers blocks is h + W2·relu(W1·h + b1) + b2,
// W1 hidden×ffn, W2 ffn×hidden, applied to every token. At hidden 384, ffn
// 1536 and 9 layers a token costs about what it costs in all-MiniLM-L6-v2
// (6 layers of attention projections, 4·384², and a 384→1536→384 block),
// 10.6 M multiply-adds. Its output is last_hidden_state [-1, -1, hidden].
func TextEncoderFFN(vocab, hidden, ffn, layers int64) ([]byte, error) {
	g, err := encoderGraph("text_encoder_ffn", vocab, hidden)
	if err != nil {
		return nil, err
	}
	prev := "emb"
	for l := range layers {
		up, down := fmt.Sprintf("W%d_up", l), fmt.Sprintf("W%d_down", l)
		bu, bd := fmt.Sprintf("b%d_up", l), fmt.Sprintf("b%d_down", l)
		for _, w := range []struct {
			name string
			dims []int64
			val  []float64
		}{
			{up, []int64{hidden, ffn}, MLPWeights(2*l, hidden, ffn)}, {bu, []int64{ffn}, MLPBias(2*l, ffn)},
			{down, []int64{ffn, hidden}, MLPWeights(2*l+1, ffn, hidden)}, {bd, []int64{hidden}, MLPBias(2*l+1, hidden)},
		} {
			data, err := Encode(Float, w.val)
			if err != nil {
				return nil, fmt.Errorf("onnxbuild: TextEncoderFFN %s: %w", w.name, err)
			}
			g.Initializer(w.name, Float, w.dims, data)
		}
		p := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
		g.Node("MatMul", []string{prev, up}, []string{p("mm1")})
		g.Node("Add", []string{p("mm1"), bu}, []string{p("a1")})
		g.Node("Relu", []string{p("a1")}, []string{p("r1")})
		g.Node("MatMul", []string{p("r1"), down}, []string{p("mm2")})
		g.Node("Add", []string{p("mm2"), bd}, []string{p("a2")})
		out := p("h")
		if l == layers-1 {
			out = "last_hidden_state"
		}
		g.Node("Add", []string{prev, p("a2")}, []string{out})
		prev = out
	}
	g.Output("last_hidden_state", Float, -1, -1, hidden)
	return Model(g, DefaultOpset)
}
