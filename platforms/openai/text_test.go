package openai

import (
	"context"
	"encoding/binary"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/textmodel"
)

// textVec is an in-Go backend standing for a model that tokenizes itself
// (an ensemble, a model.py): BYTES TEXT [n, 1] in, FP32 EMB [n, 3] out,
// each row [bytes, spaces, 1].
type textVec struct{}

func (textVec) Name() string { return "textvec" }

func (textVec) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

func (textVec) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, textVecInstance{}), nil
}

type textVecInstance struct{}

func (textVecInstance) Execute(_ context.Context, b *core.ConcatBatch) error {
	texts, err := core.BytesElements(b.Inputs[0].Data)
	if err != nil {
		return err
	}
	out := make([]byte, 0, 12*len(texts))
	for _, s := range texts {
		for _, v := range []float32{float32(len(s)), float32(strings.Count(string(s), " ")), 1} {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	b.Results = []*core.Tensor{{Name: "EMB", DataType: core.TypeFP32, Shape: []int64{int64(len(texts)), 3}, Data: out}}
	return nil
}

func (textVecInstance) Close() error { return nil }

const textVecConfig = `backend: "textvec"
max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "EMB" data_type: TYPE_FP32 dims: [ 3 ] } ]
`

func TestEmbeddingsTextModel(t *testing.T) {
	tok, err := os.ReadFile(fixture)
	servertest.Must(t, err)
	base := startServer(t, map[string]testModel{
		"textvec":    {config: textVecConfig},
		"textvec_tk": {config: textVecConfig, files: map[string]string{"tokenizer.json": string(tok)}},
	}, Options{}, textVec{})
	texts := []string{"hello world", "a b c d", "cat"}
	for model, tokens := range map[string]int{"textvec": 0, "textvec_tk": 4 + 6 + 3} {
		var got embeddingsReply
		r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": model, "input": texts})
		r.decodeJSON(t, &got)
		if r.status != http.StatusOK || len(got.Data) != len(texts) || got.Usage.PromptTokens != tokens {
			t.Fatalf("%s: %d %s; want %d tokens", model, r.status, r.body, tokens)
		}
		for i, s := range texts {
			v := []float64{float64(len(s)), float64(strings.Count(s, " ")), 1}
			n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
			near(t, s, got.Data[i].Embedding, []float64{v[0] / n, v[1] / n, v[2] / n})
		}
	}
	var e openAIErr
	r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "textvec", "input": []int{1, 2}})
	r.decodeJSON(t, &e)
	if r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, "takes text") {
		t.Fatalf("token ids to a text model: %d %s", r.status, r.body)
	}
}

// int32Encoder is TextEncoder with INT32 inputs (input_ids and
// token_type_ids only): the route sends INT32 tensors to such a model.
func int32Encoder(t *testing.T) []byte {
	g := onnxbuild.NewGraph("enc32")
	g.Input("input_ids", onnxbuild.Int32, -1, -1)
	g.Input("token_type_ids", onnxbuild.Int32, -1, -1)
	table, err := onnxbuild.Encode(onnxbuild.Float, onnxbuild.EncoderTable(vocab, hidden))
	servertest.Must(t, err)
	types, err := onnxbuild.Encode(onnxbuild.Float, onnxbuild.EncoderTypeTable(hidden))
	servertest.Must(t, err)
	g.Initializer("table", onnxbuild.Float, []int64{vocab, hidden}, table)
	g.Initializer("type_table", onnxbuild.Float, []int64{2, hidden}, types)
	g.Node("Gather", []string{"table", "input_ids"}, []string{"word"})
	g.Node("Gather", []string{"type_table", "token_type_ids"}, []string{"typed"})
	g.Output("last_hidden_state", onnxbuild.Float, -1, -1, hidden)
	g.Node("Add", []string{"word", "typed"}, []string{"last_hidden_state"})
	return onnxbuild.Must(onnxbuild.Model(g, onnxbuild.DefaultOpset))
}

func TestEmbeddingsInt32Inputs(t *testing.T) {
	tok, err := os.ReadFile(fixture)
	servertest.Must(t, err)
	base := startServer(t, map[string]testModel{"enc32": {config: `max_batch_size: 4
platform: "onnxruntime_onnx"
input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "token_type_ids" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
`, onnx: int32Encoder(t), files: map[string]string{"tokenizer.json": string(tok)}}}, Options{})
	var got embeddingsReply
	r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc32", "input": []string{"hello", long, "cat", "dog", "mat"}})
	r.decodeJSON(t, &got)
	if r.status != http.StatusOK || len(got.Data) != 5 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for i, s := range []string{"hello", long, "cat", "dog", "mat"} {
		near(t, s, got.Data[i].Embedding, expect(t, s, textmodel.Mean, true))
	}
}
