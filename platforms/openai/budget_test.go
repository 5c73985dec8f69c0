package openai

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/textmodel"
)

// paddedModels are the enc encoder opting in to padded batching
// (core/padbatch): "pad" pads to the longest of a batch, "budget" also
// groups by length under a token budget. Both wait up to 5 ms to batch.
func paddedModels(t testing.TB) map[string]testModel {
	models := encoderModels(t)
	enc := models["enc"]
	out := map[string]testModel{}
	for name, params := range map[string]string{
		"pad":    `parameters { key: "pad_inputs" value { string_value: "input_ids=0,attention_mask=0,token_type_ids=0" } }`,
		"budget": `parameters { key: "pad_inputs" value { string_value: "input_ids=0,attention_mask=0,token_type_ids=0" } }` + "\n" + `parameters { key: "token_budget" value { string_value: "64" } }`,
	} {
		cfg := strings.Replace(onnxbuild.TextEncoderConfig(name, "last_hidden_state", "[ -1, 4 ]"),
			"dynamic_batching { }", "dynamic_batching { max_queue_delay_microseconds: 5000 }", 1)
		out[name] = testModel{cfg + params + "\n", enc.onnx, enc.files}
	}
	return out
}

// mixedTexts are n texts of the fixture's vocabulary: most 3 to 5 tokens,
// every fifth 11 to 14 (the fixture model takes 16).
func mixedTexts(n int) []string {
	words := strings.Fields("the a cat dog sat on mat hello world quick brown fox")
	out := make([]string, n)
	for i := range out {
		k := 1 + i%3
		if i%5 == 4 {
			k = 9 + i%4
		}
		s := make([]string, k)
		for j := range s {
			s[j] = words[(i*7+j*3)%len(words)]
		}
		out[i] = strings.Join(s, " ")
	}
	return out
}

// TestPaddedBatchingKeepsVectors: over a real listener, 16 clients post
// texts of mixed lengths one a request; every vector is the one the text
// has alone (padding never changes a vector), and the model ran more than
// one row per execution (requests of different lengths shared them).
func TestPaddedBatchingKeepsVectors(t *testing.T) {
	base, srv := startCore(t, paddedModels(t), Options{})
	texts := mixedTexts(64)
	for _, model := range []string{"pad", "budget"} {
		t.Run(model, func(t *testing.T) {
			before := srv.ReadyVersions(model)[0].Stats.Snapshot()
			var wg sync.WaitGroup
			errs := make(chan error, len(texts))
			for c := range 16 {
				wg.Go(func() {
					for i := c; i < len(texts); i += 16 {
						var got embeddingsReply
						r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": model, "input": texts[i]})
						r.decodeJSON(t, &got)
						if r.status != http.StatusOK || len(got.Data) != 1 {
							errs <- fmt.Errorf("text %d: %d %s", i, r.status, r.body)
							return
						}
						if err := closeTo(got.Data[0].Embedding, expect(t, texts[i], textmodel.Mean, true)); err != nil {
							errs <- fmt.Errorf("text %d %q: %v", i, texts[i], err)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			after := srv.ReadyVersions(model)[0].Stats.Snapshot()
			rows, execs := after.InferenceCount-before.InferenceCount, after.ExecutionCount-before.ExecutionCount
			if rows != uint64(len(texts)) || execs == 0 || execs >= rows {
				t.Fatalf("%d rows in %d executions: want several rows per execution", rows, execs)
			}
			t.Logf("%s: %.1f rows per execution", model, float64(rows)/float64(execs))
		})
	}
}

// TestPaddedBatchingOneCall: one call's texts go sorted by length in
// groups (lengthGroups) and come back in input order.
func TestPaddedBatchingOneCall(t *testing.T) {
	base := startServer(t, paddedModels(t), Options{})
	texts := mixedTexts(20)
	var got embeddingsReply
	r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "budget", "input": texts})
	r.decodeJSON(t, &got)
	if r.status != http.StatusOK || len(got.Data) != len(texts) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for i, d := range got.Data {
		if d.Index != i {
			t.Fatalf("data[%d] has index %d", i, d.Index)
		}
		near(t, texts[i], d.Embedding, expect(t, texts[i], textmodel.Mean, true))
	}
}

func TestLengthGroups(t *testing.T) {
	mk := func(lens ...int) []row {
		rows := make([]row, len(lens))
		for i, n := range lens {
			rows[i] = row{ids: make([]int64, n)}
		}
		return rows
	}
	for _, tc := range []struct {
		name      string
		lens      []int
		size      int
		wantOrder []int
		wantParts [][2]int
	}{
		{"one", []int{5}, 8, []int{0}, [][2]int{{0, 1}}},
		{"sorted, stable", []int{9, 3, 4, 3}, 8, []int{1, 3, 2, 0}, [][2]int{{0, 3}, {3, 4}}},
		{"size bound", []int{2, 2, 2, 2, 2}, 2, []int{0, 1, 2, 3, 4}, [][2]int{{0, 2}, {2, 4}, {4, 5}}},
		{"within 2x", []int{4, 8, 9, 16, 19}, 8, []int{0, 1, 2, 3, 4}, [][2]int{{0, 2}, {2, 4}, {4, 5}}},
		{"empty rows", []int{0, 0, 3}, 8, []int{0, 1, 2}, [][2]int{{0, 2}, {2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order, parts := lengthGroups(mk(tc.lens...), tc.size)
			if fmt.Sprint(order) != fmt.Sprint(tc.wantOrder) || fmt.Sprint(parts) != fmt.Sprint(tc.wantParts) {
				t.Fatalf("order %v parts %v, want %v %v", order, parts, tc.wantOrder, tc.wantParts)
			}
		})
	}
}

// closeTo is near as an error, for goroutines.
func closeTo(got []float32, want []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d components, want %d", len(got), len(want))
	}
	for i := range got {
		if d := float64(got[i]) - want[i]; d > 1e-5 || d < -1e-5 {
			return fmt.Errorf("%v, want %v", got, want)
		}
	}
	return nil
}
