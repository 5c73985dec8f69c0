package tokenizer

import (
	"encoding/json"
	"fmt"
)

// piece is one element of a template: a sequence (A or B) or a special
// token, each with the type id its tokens get.
type piece struct {
	seq    int // 0 for A, 1 for B, -1 for a special token
	ids    []int64
	tokens []string
	typeID int64
}

// postProcessor is TemplateProcessing; BertProcessing is read into the
// same shape (huggingface/tokenizers processors/bert.rs builds
// [CLS] A [SEP] and [CLS] A [SEP] B [SEP], B's part with type id 1).
type postProcessor struct {
	single, pair []piece
}

// added returns how many special tokens the template adds.
func (p *postProcessor) added(pair bool) int {
	tpl := p.single
	if pair {
		tpl = p.pair
	}
	n := 0
	for _, pc := range tpl {
		n += len(pc.ids)
	}
	return n
}

func parsePostProcessor(raw json.RawMessage) (*postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	ty, err := componentType("post_processor", raw)
	if err != nil {
		return nil, err
	}
	switch ty {
	case "TemplateProcessing":
		return parseTemplate(raw)
	case "BertProcessing":
		var b struct {
			Sep [2]json.RawMessage `json:"sep"`
			Cls [2]json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing BertProcessing: %w", err)
		}
		cls, err := tokenPair(b.Cls)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: BertProcessing cls: %w", err)
		}
		sep, err := tokenPair(b.Sep)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: BertProcessing sep: %w", err)
		}
		sep1 := sep
		sep1.typeID = 1
		return &postProcessor{
			single: []piece{cls, {seq: 0}, sep},
			pair:   []piece{cls, {seq: 0}, sep, {seq: 1, typeID: 1}, sep1},
		}, nil
	default:
		return nil, fmt.Errorf("%w: post_processor type %q", ErrUnsupported, ty)
	}
}

// tokenPair reads BertProcessing's ["[CLS]", 101].
func tokenPair(p [2]json.RawMessage) (piece, error) {
	var tok string
	var id int64
	if err := json.Unmarshal(p[0], &tok); err != nil {
		return piece{}, err
	}
	if err := json.Unmarshal(p[1], &id); err != nil {
		return piece{}, err
	}
	return piece{seq: -1, ids: []int64{id}, tokens: []string{tok}}, nil
}

type templateJSON struct {
	Single        []pieceJSON `json:"single"`
	Pair          []pieceJSON `json:"pair"`
	SpecialTokens map[string]struct {
		IDs    []int64  `json:"ids"`
		Tokens []string `json:"tokens"`
	} `json:"special_tokens"`
}

type pieceJSON struct {
	Sequence *struct {
		ID     string `json:"id"`
		TypeID int64  `json:"type_id"`
	} `json:"Sequence"`
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID int64  `json:"type_id"`
	} `json:"SpecialToken"`
}

func parseTemplate(raw json.RawMessage) (*postProcessor, error) {
	var tj templateJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing TemplateProcessing: %w", err)
	}
	conv := func(name string, in []pieceJSON) ([]piece, error) {
		out := make([]piece, 0, len(in))
		for _, pj := range in {
			switch {
			case pj.Sequence != nil:
				seq := 0
				switch pj.Sequence.ID {
				case "A":
				case "B":
					seq = 1
				default:
					return nil, fmt.Errorf("tokenizer: TemplateProcessing %s: sequence %q", name, pj.Sequence.ID)
				}
				out = append(out, piece{seq: seq, typeID: pj.Sequence.TypeID})
			case pj.SpecialToken != nil:
				st, ok := tj.SpecialTokens[pj.SpecialToken.ID]
				if !ok || len(st.IDs) != len(st.Tokens) {
					return nil, fmt.Errorf("tokenizer: TemplateProcessing %s: special token %q undefined", name, pj.SpecialToken.ID)
				}
				out = append(out, piece{seq: -1, ids: st.IDs, tokens: st.Tokens, typeID: pj.SpecialToken.TypeID})
			default:
				return nil, fmt.Errorf("tokenizer: TemplateProcessing %s: empty piece", name)
			}
		}
		return out, nil
	}
	single, err := conv("single", tj.Single)
	if err != nil {
		return nil, err
	}
	pair, err := conv("pair", tj.Pair)
	if err != nil {
		return nil, err
	}
	return &postProcessor{single: single, pair: pair}, nil
}

// apply lays out the sequences per the template. Without special tokens
// only the type ids apply, as in processors/template.rs.
func (p *postProcessor) apply(a, b []token, addSpecial bool) Encoding {
	tpl := p.single
	if b != nil {
		tpl = p.pair
	}
	seqs := [2][]token{a, b}
	var e Encoding
	for _, pc := range tpl {
		if pc.seq >= 0 {
			e.appendTokens(seqs[pc.seq], pc.typeID)
			continue
		}
		if !addSpecial {
			continue
		}
		for i, id := range pc.ids {
			e.appendSpecial(id, pc.tokens[i], pc.typeID)
		}
	}
	return e
}
