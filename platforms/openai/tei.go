package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/repo/textmodel"
)

// TEI's request fields shared by /embed and /rerank
// (huggingface/text-embeddings-inference router/src/http/types.rs), and
// inferd's model, which names the model when several are loaded.
type teiCommon struct {
	Truncate            *bool   `json:"truncate"`
	TruncationDirection string  `json:"truncation_direction"`
	PromptName          *string `json:"prompt_name"`
	Model               string  `json:"model"`
}

// opts reads truncate (null: TEI's --auto-truncate default, off) and
// truncation_direction (right or left, as TEI spells them either way).
func (c teiCommon) opts(param string) (encodeOpts, error) {
	o := encodeOpts{param: param, fam: tei, truncate: c.Truncate != nil && *c.Truncate}
	switch c.TruncationDirection {
	case "", "right", "Right":
	case "left", "Left":
		o.left = true
	default:
		return o, invalid("truncation_direction", "`truncation_direction` must be right or left, not %q", c.TruncationDirection)
	}
	if c.PromptName != nil {
		return o, invalid("prompt_name", "`prompt_name` is not supported: this model has no prompts")
	}
	return o, nil
}

type teiEmbedRequest struct {
	teiCommon
	Inputs     json.RawMessage `json:"inputs"`
	Normalize  *bool           `json:"normalize"`
	Dimensions *int            `json:"dimensions"`
}

// teiEmbed is TEI's POST /embed → [[f32, ...], ...].
func (s *Server) teiEmbed(w http.ResponseWriter, r *http.Request) error {
	var req teiEmbedRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	opts, err := req.opts("inputs")
	if err != nil {
		return err
	}
	dims := 0
	if req.Dimensions != nil {
		if dims = *req.Dimensions; dims < 1 {
			return invalid("dimensions", "`dimensions` must be at least 1, not %d", dims)
		}
	}
	in, err := parseInputs(req.Inputs, "inputs")
	if err != nil {
		return err
	}
	t, err := s.resolveDefault(r.Context(), req.Model, textmodel.EmbeddingTokens, textmodel.EmbeddingText)
	if err != nil {
		return err
	}
	vecs, _, err := s.embed(r, embedCall{t: t, in: in, opts: opts, dims: dims, normalize: req.Normalize == nil || *req.Normalize})
	if err != nil {
		return err
	}
	release := s.api.Work()
	defer release()
	out := make([]byte, 0, 2+len(vecs)*(len(vecs[0])*12+2))
	out = append(out, '[')
	for i, v := range vecs {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = appendFloats(out, v); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, append(out, ']'))
	return nil
}

type teiRerankRequest struct {
	teiCommon
	Query      string   `json:"query"`
	Texts      []string `json:"texts"`
	RawScores  bool     `json:"raw_scores"`
	ReturnText bool     `json:"return_text"`
}

// teiRank is one of TEI's /rerank results; text is left out when not
// asked for.
type teiRank struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  *string `json:"text,omitempty"`
}

// teiRerank is TEI's POST /rerank → [{index, score, text?}], highest
// score first.
func (s *Server) teiRerank(w http.ResponseWriter, r *http.Request) error {
	var req teiRerankRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	opts, err := req.opts("texts")
	if err != nil {
		return err
	}
	t, err := s.resolveDefault(r.Context(), req.Model, textmodel.Reranker)
	if err != nil {
		return err
	}
	ranked, _, err := s.rank(r, t, req.Query, req.Texts, opts)
	if err != nil {
		return err
	}
	out := make([]teiRank, len(ranked))
	for i, rk := range ranked {
		out[i] = teiRank{Index: rk.index, Score: sigmoid(rk.logit)}
		if req.RawScores {
			out[i].Score = float64(rk.logit)
		}
		if req.ReturnText {
			out[i].Text = &req.Texts[rk.index]
		}
		if math.IsNaN(out[i].Score) {
			return invalid("texts", "the model's score for text %d is NaN", rk.index)
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// MaxTokenizeBytes bounds the text of one /tokenize call (TEI's default
// payload limit).
const MaxTokenizeBytes = 2_000_000

type teiTokenizeRequest struct {
	Inputs           json.RawMessage `json:"inputs"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
	PromptName       *string         `json:"prompt_name"`
	Model            string          `json:"model"`
}

// teiToken is one token as TEI's /tokenize answers it
// (core/src/tokenization.rs into_tokens): a special token has its token
// text and null offsets; another the text of its UTF-8 byte span.
type teiToken struct {
	ID      int64  `json:"id"`
	Text    string `json:"text"`
	Special bool   `json:"special"`
	Start   *int   `json:"start"`
	Stop    *int   `json:"stop"`
}

// teiTokenize is TEI's POST /tokenize → [[{id, text, special, start,
// stop}]], with the tokenizer of any model that has one; no truncation.
func (s *Server) teiTokenize(w http.ResponseWriter, r *http.Request) error {
	var req teiTokenizeRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if req.PromptName != nil {
		return invalid("prompt_name", "`prompt_name` is not supported: this model has no prompts")
	}
	in, err := parseInputs(req.Inputs, "inputs")
	if err != nil {
		return err
	}
	if in.ids != nil {
		return invalid("inputs", "`inputs` must be a string or an array of strings")
	}
	size := 0
	for _, t := range in.texts {
		size += len(t)
	}
	if size > MaxTokenizeBytes {
		// Tokenizing allocates about 100 bytes a token; TEI bounds the
		// whole body by --payload-limit, 2 MB by default.
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("`inputs` hold %d bytes of text; /tokenize takes at most %d", size, MaxTokenizeBytes),
			Type: invalidRequest, Param: "inputs", TEIType: "Validation"}
	}
	// Without a model: the one embedding model, else the one reranker.
	t, err := s.resolveDefault(r.Context(), req.Model, textmodel.EmbeddingTokens, textmodel.Reranker)
	if err != nil && req.Model == "" {
		var err2 error
		if t, err2 = s.resolveDefault(r.Context(), "", textmodel.EmbeddingTokens); err2 != nil {
			t, err2 = s.resolveDefault(r.Context(), "", textmodel.Reranker)
		}
		if err2 == nil {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	tok, err := t.desc.Tokenizer.WithTruncation(nil)
	if err != nil {
		return err
	}
	release := s.api.Work()
	defer release()
	special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	out := make([][]teiToken, len(in.texts))
	for i, text := range in.texts {
		enc, err := tok.Encode(text, special)
		if err != nil {
			return &Error{Status: 422, Message: "input " + strconv.Itoa(i) + ": " + err.Error(), TEIType: "Tokenizer"}
		}
		row := make([]teiToken, enc.Len())
		for j := range row {
			row[j] = teiToken{ID: enc.IDs[j], Text: enc.Tokens[j], Special: enc.Special[j]}
			if start, stop := enc.Offsets[j][0], enc.Offsets[j][1]; !enc.Special[j] && 0 <= start && start <= stop && stop <= len(text) {
				row[j].Text, row[j].Start, row[j].Stop = text[start:stop], &start, &stop
			}
		}
		out[i] = row
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
