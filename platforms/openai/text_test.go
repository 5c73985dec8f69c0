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
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
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
