package textmodel

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/tokenizer"
)

// Kind is what a model serves on the OpenAI and TEI routes.
type Kind string

// The kinds.
const (
	None            Kind = "none"
	EmbeddingTokens Kind = "embedding-tokens"
	EmbeddingText   Kind = "embedding-text"
	Reranker        Kind = "reranker"
	Generator       Kind = "generator"
)

// Embedding reports whether k answers the embedding routes.
func (k Kind) Embedding() bool { return k == EmbeddingTokens || k == EmbeddingText }

// Pooling turns a row's token embeddings into one vector.
type Pooling string

// The poolings sentence-transformers and TEI share; mean and max count
// only the positions whose attention mask is 1.
const (
	Mean      Pooling = "mean"
	CLS       Pooling = "cls"
	Max       Pooling = "max"
	LastToken Pooling = "lasttoken"
)

// Parameter keys of config.pbtxt that override the folder's files.
const (
	ParamKind      = "openai_kind"
	ParamPooling   = "pooling"
	ParamMaxLength = "max_length"
	ParamOutput    = "embedding_output"
	ParamPadding   = "pad_to_multiple_of"
)

// ErrInvalid marks a file or parameter that is present but unusable.
var ErrInvalid = errors.New("textmodel: invalid")

// Model describes one text model.
type Model struct {
	Kind Kind
	// Reason says why the model is None (or what an override forced).
	Reason string
	// Tokenizer is the folder's tokenizer.json; nil when absent.
	Tokenizer *tokenizer.Tokenizer
	// MaxLength bounds a row's tokens, special tokens included; 0: no
	// known bound.
	MaxLength int
	Pooling   Pooling
	// PadID is the id padding rows carry (padID).
	PadID int64
	// PadMultiple rounds a request's padded width up to a multiple of it
	// (1: pad to the longest row only), so that requests of nearby
	// lengths share a shape and batch together.
	PadMultiple int
	// PaddedBatch says the dynamic batcher pads input_ids across requests
	// (core/padbatch's pad_inputs names it): rows of different lengths
	// may go as separate requests and still share an execution.
	PaddedBatch bool

	// Token inputs (EmbeddingTokens, Reranker): names ("" when absent),
	// their element type, and the row length (-1: variable).
	InputIDs, AttentionMask, TokenTypeIDs string
	IDType                                modelconfig.DataType
	SeqLen                                int64
	// TextInput is the BYTES input of EmbeddingText.
	TextInput string
	// Output is the output read; OutputTokens says it holds token
	// embeddings [L, H] per row (pooled by the server) rather than a
	// pooled [H] or a logit [1]. Hidden is H (-1: known only at run time).
	Output       string
	OutputTokens bool
	Hidden       int64
	MaxBatch     int

	// Generation inputs (Generator): which optional ones the model
	// declares, and whether it is decoupled.
	Generation Generation

	// HF is config.json; TokenizerConfig tokenizer_config.json.
	HF              HFConfig
	TokenizerConfig TokenizerConfig
	// ChatTemplateFile is chat_template.jinja, "" when absent.
	ChatTemplateFile string
}

// Generation is what a generator's config declares beside text_input.
type Generation struct {
	Stream, SamplingParameters, ExcludeInputInOutput bool
	Decoupled                                        bool
}

// HFConfig holds the fields of a Hugging Face config.json read here.
type HFConfig struct {
	Architectures         []string          `json:"architectures"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	ID2Label              map[string]string `json:"id2label"`
	NumLabels             int               `json:"num_labels"`
}

// Classifier reports whether an architecture is a sequence classifier
// (a cross-encoder's BertForSequenceClassification, ...).
func (c HFConfig) Classifier() bool {
	for _, a := range c.Architectures {
		if strings.HasSuffix(a, "ForSequenceClassification") {
			return true
		}
	}
	return false
}

// Labels is the number of labels: num_labels, else id2label's size, else 0.
func (c HFConfig) Labels() int {
	if c.NumLabels > 0 {
		return c.NumLabels
	}
	return len(c.ID2Label)
}

// TokenizerConfig holds tokenizer_config.json's fields, raw where the
// format allows several shapes (a chat_template string or a list of named
// templates; a token as a string or an AddedToken object).
type TokenizerConfig struct {
	ModelMaxLength json.Number     `json:"model_max_length"`
	ChatTemplate   json.RawMessage `json:"chat_template"`
	BOSToken       json.RawMessage `json:"bos_token"`
	EOSToken       json.RawMessage `json:"eos_token"`
}

// BOS is bos_token's content, "" when absent.
func (c TokenizerConfig) BOS() string { return tokenContent(c.BOSToken) }

// EOS is eos_token's content, "" when absent.
func (c TokenizerConfig) EOS() string { return tokenContent(c.EOSToken) }

func tokenContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// maxLength is model_max_length when it is a real bound: transformers
// writes int(1e30) for "no bound", which is no bound here either.
func (c TokenizerConfig) maxLength() int {
	n, err := strconv.ParseInt(string(c.ModelMaxLength), 10, 64)
	if err != nil || n <= 0 || n > 1<<24 {
		return 0
	}
	return int(n)
}
