package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sdkReport is what testdata/openai_sdk/sdk.mjs prints: what OpenAI's Node
// client made of each answer.
type sdkReport struct {
	SDKVersion string `json:"sdk_version"`
	Models     []struct {
		ID, Object, OwnedBy string
	} `json:"models"`
	Retrieved struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	} `json:"retrieved"`
	EmbeddingsDefault struct {
		SentFormat *string `json:"sent_format"`
		Model      string  `json:"model"`
		Usage      struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
		Data []sdkEmbedding `json:"data"`
	} `json:"embeddings_default"`
	EmbeddingsFloat struct {
		SentFormat *string        `json:"sent_format"`
		Data       []sdkEmbedding `json:"data"`
	} `json:"embeddings_float"`
	EmbeddingsDimensions [][]float64 `json:"embeddings_dimensions"`
	Chat                 struct {
		ID, Object, Role, Content string
		FinishReason              string   `json:"finish_reason"`
		Usage                     sdkUsage `json:"usage"`
	} `json:"chat"`
	Stream []struct {
		Object       string    `json:"object"`
		Choices      int       `json:"choices"`
		Role         *string   `json:"role"`
		Content      *string   `json:"content"`
		FinishReason *string   `json:"finish_reason"`
		Usage        *sdkUsage `json:"usage"`
	} `json:"stream"`
	Completion struct {
		Object, Text string
		FinishReason string `json:"finish_reason"`
	} `json:"completion"`
	Errors         map[string]*sdkError `json:"errors"`
	RightKeyModels int                  `json:"right_key_models"`
}

type sdkEmbedding struct {
	Index     int       `json:"index"`
	Object    string    `json:"object"`
	Embedding []float64 `json:"embedding"`
}

type sdkUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// sdkError is an error the client raised: its class and the fields it
// read from OpenAI's error object.
type sdkError struct {
	Class    string   `json:"class"`
	Is       []string `json:"is"`
	APIError bool     `json:"api_error"`
	Status   int      `json:"status"`
	Type     *string  `json:"type"`
	Code     *string  `json:"code"`
	Param    *string  `json:"param"`
	Message  string   `json:"message"`
}

// TestOpenAINodeSDK drives the OpenAI routes with OpenAI's official Node
// client (npm openai, `make openai-node`) over real listeners against the
// example repositories: models, embeddings in the client's default base64
// and in float, dimensions, chat plain and streamed, completions, and the
// typed errors the client raises for our error objects.
func TestOpenAINodeSDK(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "openai_sdk", "sdk.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	openAINode(t) // skip before starting servers when the client is missing
	r := startExamples(t)
	repo, err := filepath.Abs("../../examples/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	keyed := start(t, "--grpc-address=127.0.0.1", "--model-repository="+repo, "--openai-api-key=sk-inferd-test")
	if keyed.http == "" {
		t.Fatalf("the keyed server did not start: %v", <-keyed.done)
	}
	out := runNode(t, string(script), "INFERD_BASE="+r.http+"/v1", "INFERD_KEYED_BASE="+keyed.http+"/v1", "INFERD_KEY=sk-inferd-test")
	var rep sdkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("the script's report: %v\n%s", err, out)
	}
	t.Logf("openai (npm) %s", rep.SDKVersion)
	if testing.Verbose() {
		t.Log(out)
	}
	checkSDKModels(t, &rep)
	checkSDKEmbeddings(t, &rep)
	checkSDKGeneration(t, &rep)
	checkSDKErrors(t, &rep)
}

func checkSDKModels(t *testing.T, rep *sdkReport) {
	t.Helper()
	ids := map[string]bool{}
	for _, m := range rep.Models {
		if m.Object != "model" {
			t.Errorf("models.list: %+v has object %q, want model", m, m.Object)
		}
		ids[m.ID] = true
	}
	for _, want := range []string{"embedder", "reranker", "chat"} {
		if !ids[want] {
			t.Errorf("models.list: %v lacks %s", ids, want)
		}
	}
	if rep.Retrieved.ID != "embedder" || rep.Retrieved.Object != "model" {
		t.Errorf("models.retrieve(embedder) = %+v", rep.Retrieved)
	}
	if rep.RightKeyModels == 0 {
		t.Error("models.list with the right key listed nothing")
	}
}

func checkSDKEmbeddings(t *testing.T, rep *sdkReport) {
	t.Helper()
	def, flt := rep.EmbeddingsDefault, rep.EmbeddingsFloat
	if def.SentFormat == nil || *def.SentFormat != "base64" {
		t.Errorf("the client's default encoding_format: %v, want base64 (else this does not test base64)", def.SentFormat)
	}
	if flt.SentFormat == nil || *flt.SentFormat != "float" {
		t.Errorf("encoding_format float was sent as %v", flt.SentFormat)
	}
	if def.Model != "embedder" || def.Usage.PromptTokens != 10 || def.Usage.TotalTokens != 10 {
		t.Errorf("embeddings: model %q, usage %+v; want embedder, 10 tokens", def.Model, def.Usage)
	}
	if len(def.Data) != 2 || len(flt.Data) != 2 {
		t.Fatalf("embeddings: %d vectors in base64, %d in float; want 2", len(def.Data), len(flt.Data))
	}
	for i := range def.Data {
		b, f := def.Data[i], flt.Data[i]
		if b.Index != i || f.Index != i || b.Object != "embedding" || len(b.Embedding) != 8 || len(f.Embedding) != 8 {
			t.Fatalf("vector %d: base64 %+v, float %+v", i, b, f)
		}
		var norm float64
		for j := range b.Embedding {
			if d := math.Abs(b.Embedding[j] - f.Embedding[j]); d > 1e-6 {
				t.Errorf("vector %d[%d]: base64 %v, float %v (|Δ| %g > 1e-6)", i, j, b.Embedding[j], f.Embedding[j], d)
			}
			norm += b.Embedding[j] * b.Embedding[j]
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("vector %d: squared norm %v, want 1", i, norm)
		}
	}
	// dimensions 4 keeps the first four components and re-normalises.
	full := flt.Data[0].Embedding
	if len(rep.EmbeddingsDimensions) != 1 || len(rep.EmbeddingsDimensions[0]) != 4 {
		t.Fatalf("dimensions 4: %v", rep.EmbeddingsDimensions)
	}
	var n float64
	for _, v := range full[:4] {
		n += v * v
	}
	for j, v := range rep.EmbeddingsDimensions[0] {
		if want := full[j] / math.Sqrt(n); math.Abs(v-want) > 1e-6 {
			t.Errorf("dimensions 4: [%d] = %v, want %v", j, v, want)
		}
	}
}

func checkSDKGeneration(t *testing.T, rep *sdkReport) {
	t.Helper()
	c := rep.Chat
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Role != "assistant" ||
		c.Content != "You said: hello there" || c.FinishReason != "stop" ||
		c.Usage.CompletionTokens != 4 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens || c.Usage.PromptTokens == 0 {
		t.Errorf("chat.completions.create: %+v", c)
	}
	s := rep.Stream
	if len(s) < 3 {
		t.Fatalf("stream: %d chunks", len(s))
	}
	if s[0].Role == nil || *s[0].Role != "assistant" {
		t.Errorf("stream: the first chunk %+v does not carry the role", s[0])
	}
	var text strings.Builder
	finished := 0
	for i, ch := range s {
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("stream chunk %d: object %q", i, ch.Object)
		}
		if ch.Content != nil {
			text.WriteString(*ch.Content)
		}
		if ch.FinishReason != nil {
			finished++
			if *ch.FinishReason != "stop" || i != len(s)-2 {
				t.Errorf("stream chunk %d of %d: finish_reason %q, want stop in the chunk before usage's", i, len(s), *ch.FinishReason)
			}
		}
	}
	if text.String() != "You said: hello there" || finished != 1 {
		t.Errorf("stream: deltas %q, %d finish_reasons; want \"You said: hello there\", 1", text.String(), finished)
	}
	last := s[len(s)-1]
	if last.Choices != 0 || last.Usage == nil || last.Usage.CompletionTokens != 4 || last.Usage.TotalTokens != last.Usage.PromptTokens+4 {
		t.Errorf("stream: the last chunk %+v is not the usage chunk (choices [], usage)", last)
	}
	if p := rep.Completion; p.Object != "text_completion" || p.Text != "You said: good" || p.FinishReason != "length" {
		t.Errorf("completions.create: %+v", p)
	}
}

func checkSDKErrors(t *testing.T, rep *sdkReport) {
	t.Helper()
	cases := []struct {
		name, class       string
		status            int
		typ, code, param  string
		messageMentioning string
	}{
		{"unknown_model", "NotFoundError", 404, "invalid_request_error", "model_not_found", "model", "no-such-model"},
		{"unknown_model_retrieve", "NotFoundError", 404, "invalid_request_error", "model_not_found", "model", "no-such-model"},
		{"empty_input", "BadRequestError", 400, "invalid_request_error", "", "input", ""},
		{"bad_dimensions", "BadRequestError", 400, "invalid_request_error", "", "dimensions", ""},
		{"chat_n", "BadRequestError", 400, "invalid_request_error", "", "n", ""},
		{"wrong_key", "AuthenticationError", 401, "invalid_request_error", "invalid_api_key", "", "API key"},
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, c := range cases {
		e := rep.Errors[c.name]
		if e == nil {
			t.Errorf("%s: the client raised nothing", c.name)
			continue
		}
		if e.Class != c.class || len(e.Is) != 1 || e.Is[0] != c.class || !e.APIError || e.Status != c.status ||
			str(e.Type) != c.typ || str(e.Code) != c.code || str(e.Param) != c.param || !strings.Contains(e.Message, c.messageMentioning) {
			t.Errorf("%s: the client raised %+v (type %q code %q param %q); want %s %d type %q code %q param %q",
				c.name, e, str(e.Type), str(e.Code), str(e.Param), c.class, c.status, c.typ, c.code, c.param)
		}
	}
}
