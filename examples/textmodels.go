package examples

import (
	"encoding/json"
	"strings"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// The text examples, served on the OpenAI and TEI routes (docs/openai.md):
// "embedder", a BERT-like encoder whose token embeddings the server pools
// (mean), and "reranker", a cross-encoder. Both read exampleWords through
// a WordPiece tokenizer.json written here; their weights are
// onnxbuild's encoder tables, so they embed and rank deterministically but
// mean nothing.

// exampleWords is the examples' vocabulary after the five special tokens.
var exampleWords = strings.Fields(`the a an of to in on is are was be and or not what which who how where
when capital city country france paris germany berlin italy rome cat cats dog dogs sat mat runs fast
slow hello world quick brown fox jumps over lazy model models text embed embedding search query document
server fast small large good bad day night sun moon water fire . , ? ! ##s ##ing ##ed ##ly`)

// exampleHidden is the examples' embedding size.
const exampleHidden = 8

func exampleVocab() int64 { return int64(5 + len(exampleWords)) }

// tokenizerJSON is a BERT-style WordPiece tokenizer.json over
// exampleWords: lower-casing BertNormalizer, BertPreTokenizer, [CLS] A
// [SEP] (pairs: [CLS] A [SEP] B [SEP]), no truncation or padding.
func tokenizerJSON() ([]byte, error) {
	specials := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	vocab := map[string]int{}
	var added []map[string]any
	for i, s := range specials {
		vocab[s] = i
		added = append(added, map[string]any{"id": i, "content": s, "single_word": false, "lstrip": false, "rstrip": false,
			"normalized": false, "special": true})
	}
	for i, w := range exampleWords {
		vocab[w] = len(specials) + i
	}
	special := func(id string, typeID int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": typeID}}
	}
	seq := func(id string, typeID int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typeID}}
	}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer":    map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)},
			"pair":   []any{special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)},
			"special_tokens": map[string]any{
				"[CLS]": map[string]any{"id": "[CLS]", "ids": []int{2}, "tokens": []string{"[CLS]"}},
				"[SEP]": map[string]any{"id": "[SEP]", "ids": []int{3}, "tokens": []string{"[SEP]"}},
			},
		},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": vocab},
	}
	data, err := json.MarshalIndent(tok, "", " ")
	return append(data, '\n'), err
}

// textFiles are the files beside an example text model's config.pbtxt:
// tokenizer.json and a Hugging Face config.json naming arch.
func textFiles(arch string, extra string) func() (map[string][]byte, error) {
	return func() (map[string][]byte, error) {
		tok, err := tokenizerJSON()
		if err != nil {
			return nil, err
		}
		cfg := `{"architectures": ["` + arch + `"], "max_position_embeddings": 128` + extra + "}\n"
		return map[string][]byte{"tokenizer.json": tok, "config.json": []byte(cfg)}, nil
	}
}

// tokenInputs are the encoders' inputs.
var tokenInputs = []tensorSpec{
	{"input_ids", onnxbuild.Int64, []int64{-1}},
	{"attention_mask", onnxbuild.Int64, []int64{-1}},
	{"token_type_ids", onnxbuild.Int64, []int64{-1}},
}

// textSpecs are the text example models.
var textSpecs = []modelSpec{
	{
		repo:         RepositoryDir,
		name:         "embedder",
		maxBatchSize: 8,
		inputs:       tokenInputs,
		outputs:      []tensorSpec{{"last_hidden_state", onnxbuild.Float, []int64{-1, exampleHidden}}},
		onnx:         func() ([]byte, error) { return onnxbuild.TextEncoder(exampleVocab(), exampleHidden) },
		files:        textFiles("BertModel", ""),
		// Token-budget batching (docs/openai.md): texts of similar
		// length share an execution, padded to the longest of it.
		tail: "dynamic_batching { max_queue_delay_microseconds: 500 }\n" +
			"parameters { key: \"pad_inputs\" value { string_value: \"input_ids=0,attention_mask=0,token_type_ids=0\" } }\n" +
			"parameters { key: \"token_budget\" value { string_value: \"1024\" } }\n",
	},
	{
		repo:         RepositoryDir,
		name:         "reranker",
		maxBatchSize: 8,
		inputs:       tokenInputs,
		outputs:      []tensorSpec{{"logits", onnxbuild.Float, []int64{1}}},
		onnx:         func() ([]byte, error) { return onnxbuild.CrossEncoder(exampleVocab(), exampleHidden) },
		files:        textFiles("BertForSequenceClassification", `, "id2label": {"0": "LABEL_0"}`),
		tail:         "dynamic_batching { max_queue_delay_microseconds: 500 }\n",
	},
}

func init() { specs = append(specs, textSpecs...) }
