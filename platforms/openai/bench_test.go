package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/textmodel"
)

// The benchmark encoder: the fixture's vocabulary, 384 dims, two
// 384×384 layers per token (about 0.6 MFLOP a token), one instance with
// one ORT thread, batches of up to 8 requests.
const (
	benchHidden = 384
	benchLayers = 2
	benchConc   = 16
	benchBatch  = 8
)

func benchConfig(name, extra string) string {
	return fmt.Sprintf(`name: %q
platform: "onnxruntime_onnx"
max_batch_size: %d
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] }
]
output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, %d ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
dynamic_batching { max_queue_delay_microseconds: 500 }
%s`, name, benchBatch, benchHidden, extra)
}

// benchTexts are n sentences of 14 to 22 words of the fixture's
// vocabulary (16 to 24 tokens), the same every run.
func benchTexts(n int) []string {
	words := strings.Fields("the a cat dog sat on mat hello world quick brown fox jumps over lazy is what capital of france paris berlin embed text model")
	out := make([]string, n)
	x := uint32(7)
	for i := range out {
		x = x*1664525 + 1013904223
		k := 14 + int(x>>24)%9
		s := make([]string, k)
		for j := range s {
			x = x*1664525 + 1013904223
			s[j] = words[int(x>>16)%len(words)]
		}
		out[i] = strings.Join(s, " ")
	}
	return out
}

// padParams opts a bench model in to padded batching (core/padbatch).
const padParams = `parameters { key: "pad_inputs" value { string_value: "input_ids=0,attention_mask=0,token_type_ids=0" } }` + "\n"

func budgetParam(n int) string {
	return fmt.Sprintf(`parameters { key: "token_budget" value { string_value: "%d" } }`+"\n", n)
}

// inProcess is the same work as /v1/embeddings without HTTP or the
// scheduler: tokenize, build the padded tensors, run one ORT instance of
// the same config, pool and normalise.
type inProcess struct {
	desc *textmodel.Model
	inst core.BatchInstance
}

func newInProcess(b *testing.B, dir, name string) *inProcess {
	cfg, err := modelconfig.Parse([]byte(benchConfig(name, "")))
	servertest.Must(b, err)
	servertest.Must(b, modelconfig.Normalize(cfg, name, true))
	desc, err := textmodel.Describe(dir, cfg)
	servertest.Must(b, err)
	lib, err := onnxrt.FindLibrary("")
	servertest.Must(b, err)
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, DefaultMaxBatchSize: 4})
	servertest.Must(b, err)
	b.Cleanup(func() { _ = backend.Close() })
	inst, err := backend.NewBatchInstance(context.Background(), core.InstanceSpec{
		VersionFiles: core.VersionFiles{ModelName: name, Version: 1, ModelDir: dir, VersionDir: filepath.Join(dir, "1")},
		Name:         name + "_ref", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg,
	})
	servertest.Must(b, err)
	b.Cleanup(func() { _ = inst.Close() })
	return &inProcess{desc: desc, inst: inst}
}

// embed embeds texts as one batch.
func (p *inProcess) embed(texts []string) ([][]float32, error) {
	rows, _, err := encodeTexts(p.desc, texts, "", false, encodeOpts{param: "input"})
	if err != nil {
		return nil, err
	}
	req, _ := tokenRequest(p.desc, rows)
	bt := &core.ConcatBatch{Inputs: req.Inputs, Outputs: []string{p.desc.Output}}
	if err := p.inst.Execute(context.Background(), bt); err != nil {
		return nil, err
	}
	vecs := make([][]float32, len(texts))
	poolRows(bt.Results[0], rows, p.desc.Pooling, vecs, 0)
	for i, v := range vecs {
		vecs[i] = finish(v, 0, true)
	}
	return vecs, nil
}

// BenchmarkEmbeddings: /v1/embeddings at concurrency 16, one text a
// request, against the same work in process in batches of 8
// (BENCHMARKS.md, "OpenAI embeddings"), on an encoder whose tokens cost
// little (two 384×384 layers), so that the server's own cost per request
// shows.
func BenchmarkEmbeddings(b *testing.B) {
	benchEmbeddings(b, onnxbuild.Must(onnxbuild.TextEncoderMLP(vocab, benchHidden, benchLayers)))
}

// BenchmarkEmbeddingsFFN is the same on an encoder whose tokens cost what
// all-MiniLM-L6-v2's do (onnxbuild.TextEncoderFFN: 9 blocks of
// 384→1536→384, 10.6 M multiply-adds a token), the size of the small
// embedding models teams serve on CPUs.
func BenchmarkEmbeddingsFFN(b *testing.B) {
	benchEmbeddings(b, onnxbuild.Must(onnxbuild.TextEncoderFFN(vocab, benchHidden, 4*benchHidden, 9)))
}

func benchEmbeddings(b *testing.B, model []byte) {
	tok, err := os.ReadFile(fixture)
	servertest.Must(b, err)
	files := map[string]string{"tokenizer.json": string(tok)}
	base, srv := startCore(b, map[string]testModel{
		"bench":   {benchConfig("bench", ""), model, files},
		"bench8":  {benchConfig("bench8", `parameters { key: "pad_to_multiple_of" value { string_value: "8" } }`), model, files},
		"benchtb": {benchConfig("benchtb", padParams+budgetParam(512)), model, files},
	}, Options{})
	dir := b.TempDir()
	servertest.WriteModel(b, dir, servertest.Model{Config: benchConfig("bench", ""), ONNX: model})
	servertest.Must(b, os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644))
	ref := newInProcess(b, dir, "bench")
	texts := benchTexts(256)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchConc}}
	// The openai SDKs ask for base64 unless told otherwise; the loop
	// checks the status and reads the body, decoding only what the
	// equality check below needs.
	post := func(model, text string, decode bool) ([]float32, error) {
		req := map[string]any{"model": model, "input": text, "encoding_format": "base64"}
		if decode {
			delete(req, "encoding_format")
		}
		body, _ := json.Marshal(req)
		resp, err := client.Post(base+"/v1/embeddings", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%d %s %v", resp.StatusCode, data, err)
		}
		if !decode {
			return nil, nil
		}
		var got embeddingsReply
		if err := json.Unmarshal(data, &got); err != nil {
			return nil, err
		}
		return got.Data[0].Embedding, nil
	}
	// Both paths compute the same vectors.
	want, err := ref.embed(texts[:benchBatch])
	servertest.Must(b, err)
	for _, m := range []string{"bench", "bench8", "benchtb"} {
		for i := range benchBatch {
			got, err := post(m, texts[i], true)
			servertest.Must(b, err)
			if err := sameVector(got, want[i]); err != nil {
				b.Fatalf("%s: text %d over HTTP differs from in process: %v", m, i, err)
			}
		}
	}

	var next atomic.Uint64
	rs := sidebyside.Results{}
	rs.Run(b, "in-process/batch8", 1, benchBatch, func() error {
		i := int(next.Add(benchBatch)) % (len(texts) - benchBatch)
		_, err := ref.embed(texts[i : i+benchBatch])
		return err
	})
	for _, c := range []struct{ name, model string }{{"http-v1-embeddings/c16", "bench"}, {"http-v1-embeddings/c16/pad8", "bench8"},
		{"http-v1-embeddings/c16/budget", "benchtb"}} {
		rs.RunExecutions(b, c.name, benchConc, srv, c.model, func() error {
			_, err := post(c.model, texts[int(next.Add(1))%len(texts)], false)
			return err
		})
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "http/in-process-thru", Num: "http-v1-embeddings/c16", Den: "in-process/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "pad8/in-process-thru", Num: "http-v1-embeddings/c16/pad8", Den: "in-process/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "budget/in-process-thru", Num: "http-v1-embeddings/c16/budget", Den: "in-process/batch8", Of: sidebyside.InferOf},
	)
}

// sameVector compares two embeddings with a tolerance: a batch of 8 may
// round differently from a batch of 1.
func sameVector(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d components, want %d", len(got), len(want))
	}
	for i := range got {
		if d := got[i] - want[i]; d > 1e-4 || d < -1e-4 {
			return fmt.Errorf("component %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}
