package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/textmodel"
	"github.com/inferd/inferd/repo/tokenizer"
)

// expect computes in the test what a model must give for text: the
// fixture's tokens, looked up in the encoders' tables, pooled over the
// row's own tokens, then L2-normalised when normalize is set.
func expect(t *testing.T, text string, pool textmodel.Pooling, normalize bool) []float64 {
	t.Helper()
	tok, err := tokenizer.Load(fixture)
	servertest.Must(t, err)
	enc, err := tok.Encode(text, true)
	servertest.Must(t, err)
	return expectIDs(enc.IDs, enc.TypeIDs, pool, normalize)
}

func expectIDs(ids, types []int64, pool textmodel.Pooling, normalize bool) []float64 {
	table, typeTable := onnxbuild.EncoderTable(vocab, hidden), onnxbuild.EncoderTypeTable(hidden)
	emb := func(pos, h int) float64 {
		return float64(float32(table[ids[pos]*hidden+int64(h)] + typeTable[types[pos]*hidden+int64(h)]))
	}
	v := make([]float64, hidden)
	for h := range v {
		switch pool {
		case textmodel.CLS:
			v[h] = emb(0, h)
		default:
			for pos := range ids {
				v[h] += emb(pos, h)
			}
			v[h] /= float64(len(ids))
		}
	}
	if normalize {
		var s float64
		for _, x := range v {
			s += x * x
		}
		for h := range v {
			v[h] /= math.Sqrt(s)
		}
	}
	return v
}

func near(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d components, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

type embeddingsReply struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

const long = "the quick brown fox jumps over the lazy dog"

func TestEmbeddings(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	many := make([]string, 20) // more rows than max_batch_size 8
	for i := range many {
		many[i] = strings.Repeat("cat ", i%5+1)
	}
	tests := []struct {
		name   string
		model  string
		input  any
		dims   int
		pool   textmodel.Pooling
		texts  []string // what each row must embed
		tokens int
	}{
		{"one string", "enc", "Hello, world!", 0, textmodel.Mean, []string{"Hello, world!"}, 6},
		{"short beside long", "enc", []string{"hello", long}, 0, textmodel.Mean, []string{"hello", long}, 3 + 11},
		{"pooled in the model", "pooled", []string{"hello", long}, 0, textmodel.Mean, []string{"hello", long}, 14},
		{"cls pooling", "cls", []string{"hello", long}, 0, textmodel.CLS, []string{"hello", long}, 14},
		{"token ids", "enc", []int64{2, 12, 13, 3}, 0, textmodel.Mean, []string{"hello world"}, 4},
		{"rows of token ids", "enc", [][]int64{{2, 12, 3}, {2, 12, 13, 3}}, 0, textmodel.Mean, []string{"hello", "hello world"}, 7},
		{"more rows than max_batch_size", "enc", many, 0, textmodel.Mean, many, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got embeddingsReply
			r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": tc.model, "input": tc.input})
			r.decodeJSON(t, &got)
			if r.status != http.StatusOK || got.Object != "list" || got.Model != tc.model || len(got.Data) != len(tc.texts) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if tc.tokens > 0 && (got.Usage.PromptTokens != tc.tokens || got.Usage.TotalTokens != tc.tokens) {
				t.Fatalf("usage %+v, want %d tokens", got.Usage, tc.tokens)
			}
			for i, d := range got.Data {
				if d.Object != "embedding" || d.Index != i {
					t.Fatalf("data[%d]: %+v", i, d)
				}
				near(t, tc.texts[i], d.Embedding, expect(t, tc.texts[i], tc.pool, true))
			}
		})
	}
}

// TestEmbeddingsPadding: a short input alone and the same input batched
// with a long one give the same vector, bit for bit.
func TestEmbeddingsPadding(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	for _, model := range []string{"enc", "pooled", "cls"} {
		var alone, batched embeddingsReply
		do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": model, "input": "hello"}).decodeJSON(t, &alone)
		do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": model, "input": []string{long, "hello"}}).decodeJSON(t, &batched)
		if len(alone.Data) != 1 || len(batched.Data) != 2 {
			t.Fatalf("%s: %+v %+v", model, alone, batched)
		}
		for i, x := range alone.Data[0].Embedding {
			if batched.Data[1].Embedding[i] != x {
				t.Fatalf("%s: padding changed the vector: %v alone, %v beside a long input", model, alone.Data[0].Embedding, batched.Data[1].Embedding)
			}
		}
	}
}

// TestEmbeddingsPadMultiple: pad_to_multiple_of widens the padded rows,
// and the vectors stay those of the unpadded model.
func TestEmbeddingsPadMultiple(t *testing.T) {
	all := encoderModels(t)
	enc8 := all["enc"]
	enc8.config = strings.Replace(enc8.config, `name: "enc"`, `name: "enc8"`, 1) +
		`parameters { key: "pad_to_multiple_of" value { string_value: "8" } }`
	base := startServer(t, map[string]testModel{"enc": all["enc"], "enc8": enc8}, Options{})
	input := []string{"hello", long, "cat"}
	var plain, padded embeddingsReply
	do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc", "input": input}).decodeJSON(t, &plain)
	do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc8", "input": input}).decodeJSON(t, &padded)
	if len(plain.Data) != 3 || len(padded.Data) != 3 {
		t.Fatalf("%+v %+v", plain, padded)
	}
	for i := range input {
		if !slices.Equal(plain.Data[i].Embedding, padded.Data[i].Embedding) {
			t.Fatalf("row %d: %v padded to a multiple of 8, %v not", i, padded.Data[i].Embedding, plain.Data[i].Embedding)
		}
	}
}

func TestBucket(t *testing.T) {
	for _, c := range []struct{ n, multiple, limit, want int }{
		{5, 1, 0, 5}, {5, 8, 0, 8}, {8, 8, 0, 8}, {9, 8, 512, 16}, {13, 8, 14, 14}, {20, 8, 16, 20},
	} {
		if got := bucket(c.n, c.multiple, c.limit); got != c.want {
			t.Errorf("bucket(%d, %d, %d) = %d, want %d", c.n, c.multiple, c.limit, got, c.want)
		}
	}
}

func TestEmbeddingsBase64AndDimensions(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	var plain embeddingsReply
	do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc", "input": long}).decodeJSON(t, &plain)
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	r := do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc", "input": long, "encoding_format": "base64"})
	r.decodeJSON(t, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*hidden {
		t.Fatalf("base64 %q: %v", b64.Data[0].Embedding, err)
	}
	for i := range hidden {
		if x := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); x != plain.Data[0].Embedding[i] {
			t.Fatalf("base64 component %d is %v, float gave %v", i, x, plain.Data[0].Embedding[i])
		}
	}
	var cut embeddingsReply
	do(t, http.MethodPost, base+"/v1/embeddings", map[string]any{"model": "enc", "input": long, "dimensions": 2}).decodeJSON(t, &cut)
	full := expect(t, long, textmodel.Mean, false)
	n := math.Hypot(full[0], full[1])
	near(t, "dimensions 2", cut.Data[0].Embedding, []float64{full[0] / n, full[1] / n})
}

func TestEmbeddingsErrors(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	tooMany := make([]string, MaxItems+1)
	for i := range tooMany {
		tooMany[i] = "a"
	}
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		param  string
		says   string
	}{
		{"unknown model", map[string]any{"model": "nope", "input": "a"}, 404, "model_not_found", "model", "nope"},
		{"no model", map[string]any{"input": "a"}, 400, "", "model", "model"},
		{"not a text model", map[string]any{"model": "simple", "input": "a"}, 400, "", "model", "none"},
		{"a reranker", map[string]any{"model": "rerank", "input": "a"}, 400, "", "model", "reranker"},
		{"no input", map[string]any{"model": "enc"}, 400, "", "input", "empty"},
		{"empty list", map[string]any{"model": "enc", "input": []string{}}, 400, "", "input", "empty"},
		{"empty string", map[string]any{"model": "enc", "input": ""}, 400, "", "input", "empty"},
		{"empty string in a list", map[string]any{"model": "enc", "input": []string{"a", ""}}, 400, "", "input", "input[1]"},
		{"too many", map[string]any{"model": "enc", "input": tooMany}, 400, "", "input", "2048"},
		{"mixed types", map[string]any{"model": "enc", "input": []any{"a", 3}}, 400, "", "input", "mixes"},
		{"an object", map[string]any{"model": "enc", "input": map[string]string{"a": "b"}}, 400, "", "input", "must be"},
		{"too long", map[string]any{"model": "enc", "input": strings.Repeat("cat ", 15)}, 400, "", "input", "maximum context length is 16 tokens"},
		{"too many bytes", map[string]any{"model": "enc", "input": []string{"a", strings.Repeat("b", 1025)}}, 400, "", "input", "input 1 has 1025 bytes"},
		{"id outside the vocabulary", map[string]any{"model": "enc", "input": []int{2, 39, 3}}, 400, "", "input", "vocabulary"},
		{"dimensions 0", map[string]any{"model": "enc", "input": "a", "dimensions": 0}, 400, "", "dimensions", "at least 1"},
		{"dimensions over H", map[string]any{"model": "enc", "input": "a", "dimensions": 5}, 400, "", "dimensions", "between 1 and 4"},
		{"encoding_format", map[string]any{"model": "enc", "input": "a", "encoding_format": "int8"}, 400, "", "encoding_format", "int8"},
		{"bad JSON", `{"model": "enc", "input": [`, 400, "", "", "JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e openAIErr
			r := do(t, http.MethodPost, base+"/v1/embeddings", tc.body)
			r.decodeJSON(t, &e)
			code, param := "", ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if r.status != tc.status || code != tc.code || param != tc.param || e.Error.Type != invalidRequest || !strings.Contains(e.Error.Message, tc.says) {
				t.Fatalf("%d %s; want %d code %q param %q saying %q", r.status, r.body, tc.status, tc.code, tc.param, tc.says)
			}
		})
	}
	if r := do(t, http.MethodGet, base+"/v1/embeddings", nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/embeddings: %d %s", r.status, r.body)
	}
}

// TestEmbeddingsConcurrent: requests of nearby lengths from 16 clients
// batch together in the model (pad_to_multiple_of 8), and each still gets
// its own text's vector.
func TestEmbeddingsConcurrent(t *testing.T) {
	all := encoderModels(t)
	enc8 := all["enc"]
	enc8.config = strings.Replace(enc8.config, `name: "enc"`, `name: "enc8"`, 1) +
		`parameters { key: "pad_to_multiple_of" value { string_value: "8" } }`
	base, srv := startCore(t, map[string]testModel{"enc8": enc8}, Options{})
	texts := benchTexts(32)
	for i := range texts {
		texts[i] = strings.Join(strings.Fields(texts[i])[:i%6+1], " ")
	}
	want := make([][]float64, len(texts))
	for i, s := range texts {
		want[i] = expect(t, s, textmodel.Mean, true)
	}
	errs := make(chan error, 16)
	for c := range 16 {
		go func() {
			for k := range 8 {
				i := (c*8 + k) % len(texts)
				var got embeddingsReply
				body, _ := json.Marshal(map[string]any{"model": "enc8", "input": texts[i]})
				resp, err := http.Post(base+"/v1/embeddings", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || json.Unmarshal(data, &got) != nil || resp.StatusCode != http.StatusOK || len(got.Data) != 1 {
					errs <- fmt.Errorf("%q: %d %s %v", texts[i], resp.StatusCode, data, err)
					return
				}
				for j, x := range got.Data[0].Embedding {
					if math.Abs(float64(x)-want[i][j]) > 1e-5 {
						errs <- fmt.Errorf("%q: %v, want %v", texts[i], got.Data[0].Embedding, want[i])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mv, release, err := srv.Acquire("enc8", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	if s := mv.Stats.Snapshot(); s.ExecutionCount >= s.InferenceCount {
		t.Logf("no batching happened (%d executions for %d inferences): the vectors were still checked", s.ExecutionCount, s.InferenceCount)
	}
}
