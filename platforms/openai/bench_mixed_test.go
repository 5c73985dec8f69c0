package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
)

// mixedBenchTexts are n texts, 4 in 5 short (8 to 16 tokens) and 1 in 5
// long (200 to 256 tokens), words of the fixture's vocabulary, the same
// every run (each word is one token; [CLS] and [SEP] add two).
func mixedBenchTexts(n int) []string {
	words := strings.Fields("the a cat dog sat on mat hello world quick brown fox jumps over lazy is what capital of france paris berlin embed text model")
	out := make([]string, n)
	x := uint32(11)
	next := func() uint32 { x = x*1664525 + 1013904223; return x >> 8 }
	for i := range out {
		k := 6 + int(next()%9) // 8 to 16 tokens
		if i%5 == 2 {
			k = 198 + int(next()%55) // 200 to 256 tokens
		}
		s := make([]string, k)
		for j := range s {
			s[j] = words[int(next())%len(words)]
		}
		out[i] = strings.Join(s, " ")
	}
	return out
}

// BenchmarkEmbeddingsMixed: /v1/embeddings at concurrency 16, one text a
// request, 80 % short and 20 % long texts, on the same model with plain
// padding (pad_inputs: batches formed as usual, padded to their longest)
// and with the token budget (rows within 2× of each other, rows × longest
// ≤ 2048) (BENCHMARKS.md, "OpenAI embeddings"):
//
//	go test ./platforms/openai -run '^$' -bench EmbeddingsMixed -benchtime 2s -count 5
func BenchmarkEmbeddingsMixed(b *testing.B) {
	tok, err := os.ReadFile(fixture)
	servertest.Must(b, err)
	model := onnxbuild.Must(onnxbuild.TextEncoderMLP(vocab, benchHidden, benchLayers))
	files := map[string]string{"tokenizer.json": string(tok)}
	base, srv := startCore(b, map[string]testModel{
		"mixpad":    {benchConfig("mixpad", padParams), model, files},
		"mixbudget": {benchConfig("mixbudget", padParams+budgetParam(benchBatch*256)), model, files},
	}, Options{})
	texts := mixedBenchTexts(250)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchConc}}
	post := func(model, text string) error {
		body, _ := json.Marshal(map[string]any{"model": model, "input": text, "encoding_format": "base64"})
		resp, err := client.Post(base+"/v1/embeddings", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s %v", resp.StatusCode, data, err)
		}
		return nil
	}
	var next atomic.Uint64
	rs := sidebyside.Results{}
	for _, c := range []struct{ name, model string }{{"mixed/c16/pad", "mixpad"}, {"mixed/c16/budget", "mixbudget"}} {
		rs.RunExecutions(b, c.name, benchConc, srv, c.model, func() error {
			return post(c.model, texts[int(next.Add(1))%len(texts)])
		})
	}
	rs.Report(b, sidebyside.Ratio{Unit: "budget/pad-thru", Num: "mixed/c16/budget", Den: "mixed/c16/pad", Of: sidebyside.InferOf})
}
