package textmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mc "github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/tokenizer"
)

const (
	tokenInputs = `max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
        { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] },
        { name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
`
	tokensOut = `output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
`
	pooledOut = `output [ { name: "sentence_embedding" data_type: TYPE_FP32 dims: [ 4 ] } ]
`
	logitOut = `output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1 ] } ]
`
	crossEncoder = `{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}, "max_position_embeddings": 512}`
)

// writeFolder writes a model folder: config.pbtxt and the named files
// ("tokenizer.json" copies the fixture when its content is "").
func writeFolder(t *testing.T, config string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(config), 0o644))
	for name, content := range files {
		if name == "tokenizer.json" && content == "" {
			data, err := os.ReadFile(filepath.Join("testdata", "tokenizer.json"))
			must(t, err)
			content = string(data)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func describe(t *testing.T, config string, files map[string]string) (*Model, error) {
	t.Helper()
	dir := writeFolder(t, config, files)
	cfg, err := mc.Parse([]byte(config))
	must(t, err)
	return Describe(dir, cfg)
}

func TestDescribeKinds(t *testing.T) {
	tok := map[string]string{"tokenizer.json": ""}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"tokenizer.json": ""}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		config  string
		files   map[string]string
		kind    Kind
		pooling Pooling
		maxLen  int
		tokens  bool
		reason  string // a substring of Reason
	}{
		{"token embeddings", tokenInputs + tokensOut, tok, EmbeddingTokens, Mean, 0, true, ""},
		{"pooled", tokenInputs + pooledOut, tok, EmbeddingTokens, Mean, 0, false, ""},
		{"cross-encoder", tokenInputs + logitOut, with(map[string]string{"config.json": crossEncoder}), Reranker, Mean, 512, false, ""},
		{"classifier of 3 labels", tokenInputs + logitOut,
			with(map[string]string{"config.json": `{"architectures": ["BertForSequenceClassification"], "num_labels": 3}`}), None, Mean, 0, false, "classifier"},
		{"no tokenizer.json", tokenInputs + tokensOut, nil, None, Mean, 0, true, "no tokenizer.json"},
		{"generator", `backend: "python"
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }, { name: "stream" data_type: TYPE_BOOL dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
model_transaction_policy { decoupled: true }
`, nil, Generator, Mean, 0, false, ""},
		{"text embeddings", `max_batch_size: 4
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "EMB" data_type: TYPE_FP32 dims: [ 8 ] } ]
`, nil, EmbeddingText, Mean, 0, false, ""},
		{"no batching", "max_batch_size: 0\n" + strings.TrimPrefix(tokenInputs, "max_batch_size: 8\n") + tokensOut, tok, None, Mean, 0, false, "max_batch_size"},
		{"pooling cls from 1_Pooling", tokenInputs + tokensOut,
			with(map[string]string{"1_Pooling/config.json": `{"word_embedding_dimension": 4, "pooling_mode_cls_token": true}`}), EmbeddingTokens, CLS, 0, true, ""},
		{"pooling parameter wins", tokenInputs + tokensOut + `parameters { key: "pooling" value { string_value: "max" } }`,
			with(map[string]string{"1_Pooling/config.json": `{"pooling_mode_cls_token": true}`}), EmbeddingTokens, Max, 0, true, ""},
		{"sentence_bert_config first", tokenInputs + tokensOut,
			with(map[string]string{"sentence_bert_config.json": `{"max_seq_length": 128}`, "tokenizer_config.json": `{"model_max_length": 256}`,
				"config.json": `{"max_position_embeddings": 512}`}), EmbeddingTokens, Mean, 128, true, ""},
		{"model_max_length sentinel skipped", tokenInputs + tokensOut,
			with(map[string]string{"tokenizer_config.json": `{"model_max_length": 1000000000000000019884624838656}`,
				"config.json": `{"max_position_embeddings": 512}`}), EmbeddingTokens, Mean, 512, true, ""},
		{"max_length parameter", tokenInputs + tokensOut + `parameters { key: "max_length" value { string_value: "16" } }`,
			with(map[string]string{"config.json": `{"max_position_embeddings": 512}`}), EmbeddingTokens, Mean, 16, true, ""},
		{"forced none", tokenInputs + tokensOut + `parameters { key: "openai_kind" value { string_value: "none" } }`, tok, None, Mean, 0, false, "none"},
		{"forced reranker", tokenInputs + logitOut + `parameters { key: "openai_kind" value { string_value: "reranker" } }`, tok, Reranker, Mean, 0, false, ""},
		{"two outputs", tokenInputs + `output [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]`, tok, None, Mean, 0, false, "embedding_output"},
		{"two outputs, one named", tokenInputs + `output [ { name: "a" data_type: TYPE_FP32 dims: [ -1, 4 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "embedding_output" value { string_value: "b" } }`, tok, EmbeddingTokens, Mean, 0, false, ""},
		{"fixed row length bounds max", `max_batch_size: 2
input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ 32 ] } ]
` + tokensOut, with(map[string]string{"config.json": `{"max_position_embeddings": 512}`}), EmbeddingTokens, Mean, 32, true, ""},
		{"extra input", tokenInputs + `input [ { name: "pixel_values" data_type: TYPE_FP32 dims: [ 3 ] } ]` + tokensOut, tok, None, Mean, 0, false, "pixel_values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := describe(t, tc.config, tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tc.kind || m.Pooling != tc.pooling || m.MaxLength != tc.maxLen || m.Kind != None && m.OutputTokens != tc.tokens {
				t.Fatalf("kind %s pooling %s max %d tokens %v (%s); want %s %s %d %v", m.Kind, m.Pooling, m.MaxLength, m.OutputTokens, m.Reason,
					tc.kind, tc.pooling, tc.maxLen, tc.tokens)
			}
			if !strings.Contains(m.Reason, tc.reason) {
				t.Fatalf("reason %q, want it to say %q", m.Reason, tc.reason)
			}
		})
	}
}

func TestPadMultiple(t *testing.T) {
	padded := `{"version": "1.0", "padding": {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": 8,
		"pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}, "model": {"type": "WordPiece", "unk_token": "[UNK]",
		"vocab": {"[UNK]": 0, "a": 1}}}`
	tests := []struct {
		name   string
		config string
		files  map[string]string
		want   int
	}{
		{"none", tokenInputs + tokensOut, map[string]string{"tokenizer.json": ""}, 1},
		{"tokenizer.json", tokenInputs + tokensOut, map[string]string{"tokenizer.json": padded}, 8},
		{"parameter wins", tokenInputs + tokensOut + `parameters { key: "pad_to_multiple_of" value { string_value: "16" } }`,
			map[string]string{"tokenizer.json": padded}, 16},
	}
	for _, tc := range tests {
		m, err := describe(t, tc.config, tc.files)
		if err != nil || m.PadMultiple != tc.want {
			t.Fatalf("%s: %+v, %v; want PadMultiple %d", tc.name, m, err, tc.want)
		}
	}
	if _, err := describe(t, tokenInputs+tokensOut+`parameters { key: "pad_to_multiple_of" value { string_value: "0" } }`, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pad_to_multiple_of 0: %v", err)
	}
}

func TestDescribeErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		files  map[string]string
		want   string
	}{
		{"bad tokenizer.json", tokenInputs + tokensOut, map[string]string{"tokenizer.json": "{"}, "tokenizer.json"},
		{"bad config.json", tokenInputs + tokensOut, map[string]string{"config.json": "[1"}, "config.json"},
		{"concatenated pooling", tokenInputs + tokensOut, map[string]string{"1_Pooling/config.json": `{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}`}, "concatenated"},
		{"unknown pooling", tokenInputs + tokensOut + `parameters { key: "pooling" value { string_value: "median" } }`, nil, "median"},
		{"bad max_length", tokenInputs + tokensOut + `parameters { key: "max_length" value { string_value: "-3" } }`, nil, "max_length"},
		{"bad kind", tokenInputs + tokensOut + `parameters { key: "openai_kind" value { string_value: "vision" } }`, nil, "vision"},
		{"config.json too large", tokenInputs + tokensOut, map[string]string{"config.json": strings.Repeat(" ", MaxJSONSize+1)}, "larger"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := describe(t, tc.config, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestDescribeStaysInFolder(t *testing.T) {
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "config.json"), []byte(crossEncoder), 0o644))
	dir := writeFolder(t, tokenInputs+logitOut, map[string]string{"tokenizer.json": ""})
	must(t, os.Symlink(filepath.Join(outside, "config.json"), filepath.Join(dir, "config.json")))
	cfg, err := mc.Parse([]byte(tokenInputs + logitOut))
	must(t, err)
	_, err = Describe(dir, cfg)
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("err %v: a config.json linked from outside the folder was read", err)
	}
}

func TestTokenizerConfig(t *testing.T) {
	m, err := describe(t, `backend: "python"
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
`, map[string]string{"tokenizer_config.json": `{"bos_token": {"content": "<s>", "special": true}, "eos_token": "</s>",
		"chat_template": [{"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "T"}]}`})
	must(t, err)
	if m.TokenizerConfig.BOS() != "<s>" || m.TokenizerConfig.EOS() != "</s>" {
		t.Fatalf("bos %q eos %q", m.TokenizerConfig.BOS(), m.TokenizerConfig.EOS())
	}
}

func TestPaddedBatch(t *testing.T) {
	const batching = "dynamic_batching { }\n"
	pads := func(v string) string {
		return `parameters { key: "pad_inputs" value { string_value: "` + v + `" } }` + "\n"
	}
	tests := []struct {
		name   string
		config string
		want   bool
	}{
		{"no parameters", tokenInputs + tokensOut + batching, false},
		{"input_ids padded", tokenInputs + tokensOut + batching + pads("input_ids=0,attention_mask=0"), true},
		{"input_ids not padded", tokenInputs + tokensOut + batching + pads("attention_mask=0"), false},
		// Invalid (no dynamic_batching): the load refuses it, not Describe.
		{"invalid", tokenInputs + tokensOut + pads("input_ids=0"), false},
	}
	for _, tc := range tests {
		m, err := describe(t, tc.config, map[string]string{"tokenizer.json": ""})
		if err != nil || m.PaddedBatch != tc.want {
			t.Fatalf("%s: %+v, %v; want PaddedBatch %v", tc.name, m, err, tc.want)
		}
	}
}

// TestPadID: the padding section's id, else the [PAD] or <pad> token's
// (XLM-R's is 1), else 0.
func TestPadID(t *testing.T) {
	for file, want := range map[string]int64{
		"all-minilm-l6-v2.json":     0, // [PAD]
		"small-unigram-xlmr.json":   1, // <pad>
		"small-bpe-llama3-seq.json": 0,
	} {
		tok, err := tokenizer.Load(filepath.Join("..", "tokenizer", "testdata", file))
		must(t, err)
		if got := padID(tok); got != want {
			t.Errorf("%s: pad id %d, want %d", file, got, want)
		}
	}
	if padID(nil) != 0 {
		t.Error("no tokenizer: want 0")
	}
}
