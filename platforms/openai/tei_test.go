package openai

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/textmodel"
	"github.com/inferd/inferd/repo/tokenizer"
)

func TestTEIEmbed(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	tok, err := tokenizer.Load(fixture)
	servertest.Must(t, err)
	text := strings.Repeat("cat dog ", 10)        // 22 tokens with [CLS] and [SEP]
	huge := strings.Repeat("cat dog ", 300) + "é" // 2402 bytes: cut to 1024 (16 tokens × 64) first
	truncated := func(text, dir string) []float64 {
		tt, err := tok.WithTruncation(&tokenizer.Truncation{MaxLength: 16, Direction: dir})
		servertest.Must(t, err)
		enc, err := tt.Encode(text, true)
		servertest.Must(t, err)
		return expectIDs(enc.IDs, enc.TypeIDs, textmodel.Mean, true)
	}
	tests := []struct {
		name string
		body map[string]any
		want [][]float64
	}{
		{"normalised", map[string]any{"model": "enc", "inputs": []string{"hello", long}},
			[][]float64{expect(t, "hello", textmodel.Mean, true), expect(t, long, textmodel.Mean, true)}},
		{"raw", map[string]any{"model": "enc", "inputs": "hello", "normalize": false}, [][]float64{expect(t, "hello", textmodel.Mean, false)}},
		{"truncate", map[string]any{"model": "enc", "inputs": text, "truncate": true}, [][]float64{truncated(text, "Right")}},
		{"truncate left", map[string]any{"model": "enc", "inputs": text, "truncate": true, "truncation_direction": "Left"}, [][]float64{truncated(text, "Left")}},
		{"truncate a huge text", map[string]any{"model": "enc", "inputs": huge, "truncate": true}, [][]float64{truncated(huge, "Right")}},
		{"truncate a huge text left", map[string]any{"model": "enc", "inputs": huge, "truncate": true, "truncation_direction": "left"}, [][]float64{truncated(huge, "Left")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]float32
			r := do(t, http.MethodPost, base+"/embed", tc.body)
			r.decodeJSON(t, &got)
			if r.status != http.StatusOK || len(got) != len(tc.want) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			for i := range got {
				near(t, tc.name, got[i], tc.want[i])
			}
		})
	}
}

func TestTEIErrors(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	tests := []struct {
		name, path string
		body       any
		status     int
		errType    string
		message    string // the whole message, or a part of it after "~"
	}{
		{"too long", "/embed", map[string]any{"model": "enc", "inputs": strings.Repeat("cat ", 15)}, 422, "Validation",
			"Input validation error: `inputs` must have less than 16 tokens. Given: 17"},
		{"huge without truncate", "/embed", map[string]any{"model": "enc", "inputs": strings.Repeat("a", 1025)}, 422, "Validation", "~1025 bytes"},
		{"tokenize too much", "/tokenize", map[string]any{"model": "enc", "inputs": []string{strings.Repeat("a", MaxTokenizeBytes), "b"}}, 413, "Validation", "~at most"},
		{"empty", "/embed", map[string]any{"model": "enc", "inputs": []string{}}, 400, "Empty", "~cannot be empty"},
		{"no model among several", "/embed", map[string]any{"inputs": "a"}, 400, "Validation", "~(cls, enc, pooled)"},
		{"unknown model", "/embed", map[string]any{"model": "nope", "inputs": "a"}, 404, "Validation", "~nope"},
		{"direction", "/embed", map[string]any{"model": "enc", "inputs": "a", "truncation_direction": "up"}, 422, "Validation", "~truncation_direction"},
		{"prompt_name", "/embed", map[string]any{"model": "enc", "inputs": "a", "prompt_name": "query"}, 422, "Validation", "~prompt_name"},
		{"rerank too long", "/rerank", map[string]any{"query": "cat", "texts": []string{strings.Repeat("dog ", 14)}}, 422, "Validation",
			"Input validation error: `inputs` must have less than 16 tokens. Given: 18"},
		{"rerank no texts", "/rerank", map[string]any{"query": "cat", "texts": []string{}}, 400, "Empty", "~texts"},
		{"rerank embedding model", "/rerank", map[string]any{"model": "enc", "query": "cat", "texts": []string{"a"}}, 422, "Validation", "~reranker"},
		{"tokenize ids", "/tokenize", map[string]any{"model": "enc", "inputs": []int{1, 2}}, 422, "Validation", "~string"},
		{"method", "/tokenize", nil, 405, "Validation", "Method Not Allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == nil {
				method = http.MethodGet
			}
			var e teiErr
			r := do(t, method, base+tc.path, tc.body)
			r.decodeJSON(t, &e)
			ok := e.Error == tc.message
			if part, cut := strings.CutPrefix(tc.message, "~"); cut {
				ok = strings.Contains(e.Error, part)
			}
			if r.status != tc.status || e.ErrorType != tc.errType || !ok {
				t.Fatalf("%d %s; want %d %s %q", r.status, r.body, tc.status, tc.errType, tc.message)
			}
		})
	}
}

// TestTEIDefaultModel: without "model", the one model of the route's kind.
func TestTEIDefaultModel(t *testing.T) {
	all := encoderModels(t)
	base := startServer(t, map[string]testModel{"pooled": all["pooled"], "rerank": all["rerank"], "simple": all["simple"]}, Options{})
	var got [][]float32
	r := do(t, http.MethodPost, base+"/embed", map[string]any{"inputs": "hello"})
	r.decodeJSON(t, &got)
	if r.status != http.StatusOK || len(got) != 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	near(t, "pooled", got[0], expect(t, "hello", textmodel.Mean, true))
	var toks [][]teiToken
	if r = do(t, http.MethodPost, base+"/tokenize", map[string]any{"inputs": "hello"}); r.status != http.StatusOK {
		t.Fatalf("tokenize, one embedding model and one reranker: %d %s", r.status, r.body)
	}
	r.decodeJSON(t, &toks)
	if len(toks) != 1 || len(toks[0]) != 3 || toks[0][1].ID != 12 {
		t.Fatalf("tokenize: %s", r.body)
	}
	var ranks []teiRank
	r = do(t, http.MethodPost, base+"/rerank", map[string]any{"query": "cat", "texts": []string{"a", "b"}})
	r.decodeJSON(t, &ranks)
	if r.status != http.StatusOK || len(ranks) != 2 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestTEITokenize(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	pos := func(n int) *int { return &n }
	tests := []struct {
		name string
		body map[string]any
		want [][]teiToken
	}{
		{"special tokens", map[string]any{"model": "enc", "inputs": "Hello, été!"}, [][]teiToken{{
			{2, "[CLS]", true, nil, nil}, {12, "Hello", false, pos(0), pos(5)}, {34, ",", false, pos(5), pos(6)},
			{1, "été", false, pos(7), pos(12)}, {36, "!", false, pos(12), pos(13)}, {3, "[SEP]", true, nil, nil},
		}}},
		{"without", map[string]any{"model": "rerank", "inputs": []string{"cats", "中"}, "add_special_tokens": false}, [][]teiToken{
			{{7, "cat", false, pos(0), pos(3)}, {30, "s", false, pos(3), pos(4)}},
			{{38, "中", false, pos(0), pos(3)}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]teiToken
			r := do(t, http.MethodPost, base+"/tokenize", tc.body)
			r.decodeJSON(t, &got)
			if r.status != http.StatusOK || len(got) != len(tc.want) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			for i := range got {
				if len(got[i]) != len(tc.want[i]) {
					t.Fatalf("row %d: %s", i, r.body)
				}
				for j, g := range got[i] {
					w := tc.want[i][j]
					if g.ID != w.ID || g.Text != w.Text || g.Special != w.Special || !samePos(g.Start, w.Start) || !samePos(g.Stop, w.Stop) {
						t.Fatalf("row %d token %d: %s; want %+v", i, j, r.body, w)
					}
				}
			}
		})
	}
}

func samePos(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func TestTEIAuth(t *testing.T) {
	keys, err := NewKeys([]string{"sk-1"}, nil, 0, nil)
	servertest.Must(t, err)
	base := startServer(t, encoderModels(t), Options{Keys: keys})
	var e teiErr
	r := do(t, http.MethodPost, base+"/embed", map[string]any{"model": "enc", "inputs": "a"})
	r.decodeJSON(t, &e)
	if r.status != http.StatusUnauthorized || e.ErrorType != "Unauthorized" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r = do(t, http.MethodPost, base+"/embed", map[string]any{"model": "enc", "inputs": "a"}, "Authorization", "Bearer sk-1"); r.status != http.StatusOK {
		t.Fatalf("with the key: %d %s", r.status, r.body)
	}
}
