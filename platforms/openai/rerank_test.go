package openai

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/textmodel"
	"github.com/inferd/inferd/repo/tokenizer"
)

// expectLogit is the cross-encoder's logit for (query, text), computed in
// the test: the pair's masked mean times the model's weights.
func expectLogit(t *testing.T, query, text string) float64 {
	t.Helper()
	tok, err := tokenizer.Load(fixture)
	servertest.Must(t, err)
	enc, err := tok.EncodePair(query, text, true)
	servertest.Must(t, err)
	v := expectIDs(enc.IDs, enc.TypeIDs, textmodel.Mean, false)
	var logit float64
	for h, w := range onnxbuild.CrossEncoderWeights(hidden) {
		logit += v[h] * w
	}
	return logit
}

const query = "what is the capital of france?"

var docs = []string{"the cat sat on the mat", "paris", "berlin is a capital", "hello world"}

// order is the indices of docs, highest logit first.
func order(t *testing.T) ([]int, []float64) {
	logits := make([]float64, len(docs))
	idx := make([]int, len(docs))
	for i, d := range docs {
		logits[i], idx[i] = expectLogit(t, query, d), i
	}
	for i := range idx {
		for j := i + 1; j < len(idx); j++ {
			if logits[idx[j]] > logits[idx[i]] {
				idx[i], idx[j] = idx[j], idx[i]
			}
		}
	}
	return idx, logits
}

func TestV1Rerank(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	idx, logits := order(t)
	if idx[0] == 0 && idx[1] == 1 && idx[2] == 2 {
		t.Fatalf("the documents' scores are in input order %v: the sort goes untested", idx)
	}
	type result struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
		Document       *struct {
			Text string `json:"text"`
		} `json:"document"`
	}
	var got struct {
		ID      string   `json:"id"`
		Model   string   `json:"model"`
		Results []result `json:"results"`
		Usage   struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	r := do(t, http.MethodPost, base+"/v1/rerank", map[string]any{"model": "rerank", "query": query, "documents": docs})
	r.decodeJSON(t, &got)
	if r.status != http.StatusOK || got.Model != "rerank" || !strings.HasPrefix(got.ID, "rerank-") || len(got.Results) != len(docs) || got.Usage.TotalTokens == 0 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for i, res := range got.Results {
		want := 1 / (1 + math.Exp(-logits[idx[i]]))
		if res.Index != idx[i] || math.Abs(res.RelevanceScore-want) > 1e-5 || res.Document == nil || res.Document.Text != docs[idx[i]] {
			t.Fatalf("result %d: %+v; want index %d score %v (%s)", i, res, idx[i], want, r.body)
		}
	}
	// top_n, documents as objects, no documents back.
	objs := make([]map[string]string, len(docs))
	for i, d := range docs {
		objs[i] = map[string]string{"text": d}
	}
	got.Results = nil
	r = do(t, http.MethodPost, base+"/v1/rerank", map[string]any{"model": "rerank", "query": query, "documents": objs, "top_n": 2, "return_documents": false})
	r.decodeJSON(t, &got)
	if r.status != http.StatusOK || len(got.Results) != 2 || got.Results[0].Index != idx[0] || got.Results[1].Index != idx[1] || got.Results[0].Document != nil {
		t.Fatalf("top_n 2: %d %s", r.status, r.body)
	}
}

func TestV1RerankErrors(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	tests := []struct {
		name   string
		body   map[string]any
		status int
		param  string
		says   string
	}{
		{"unknown model", map[string]any{"model": "nope", "query": "a", "documents": []string{"b"}}, 404, "model", "nope"},
		{"embedding model", map[string]any{"model": "enc", "query": "a", "documents": []string{"b"}}, 400, "model", "reranker"},
		{"no documents", map[string]any{"model": "rerank", "query": "a", "documents": []string{}}, 400, "documents", "empty"},
		{"empty document", map[string]any{"model": "rerank", "query": "a", "documents": []string{"b", ""}}, 400, "documents", "documents[1]"},
		{"no query", map[string]any{"model": "rerank", "documents": []string{"b"}}, 400, "query", "query"},
		{"negative top_n", map[string]any{"model": "rerank", "query": "a", "documents": []string{"b"}, "top_n": -1}, 400, "top_n", "top_n"},
		{"document too long", map[string]any{"model": "rerank", "query": "a", "documents": []string{strings.Repeat("dog ", 14)}}, 400, "documents", "16 tokens"},
		{"a number", map[string]any{"model": "rerank", "query": "a", "documents": []any{3}}, 400, "documents", "documents[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e openAIErr
			r := do(t, http.MethodPost, base+"/v1/rerank", tc.body)
			r.decodeJSON(t, &e)
			if r.status != tc.status || e.Error.Param == nil || *e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.says) {
				t.Fatalf("%d %s; want %d param %s saying %q", r.status, r.body, tc.status, tc.param, tc.says)
			}
		})
	}
}

func TestTEIRerank(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	idx, logits := order(t)
	for _, raw := range []bool{false, true} {
		var got []struct {
			Index int     `json:"index"`
			Score float64 `json:"score"`
			Text  *string `json:"text"`
		}
		r := do(t, http.MethodPost, base+"/rerank", map[string]any{"model": "rerank", "query": query, "texts": docs, "raw_scores": raw, "return_text": raw})
		r.decodeJSON(t, &got)
		if r.status != http.StatusOK || len(got) != len(docs) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		for i, g := range got {
			want := logits[idx[i]]
			if !raw {
				want = 1 / (1 + math.Exp(-want))
			}
			if g.Index != idx[i] || math.Abs(g.Score-want) > 1e-5 || (g.Text != nil) != raw || raw && *g.Text != docs[idx[i]] {
				t.Fatalf("raw_scores %v, result %d: %s; want index %d score %v", raw, i, r.body, idx[i], want)
			}
		}
		if !raw && strings.Contains(string(r.body), `"text"`) {
			t.Fatalf("text sent without return_text: %s", r.body)
		}
	}
}
