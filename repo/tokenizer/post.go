package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"
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
	// trim is the ByteLevel post-processor's trim_offsets, prefixSpace
	// its add_prefix_space (processors/byte_level.rs process_offsets).
	trim, prefixSpace bool
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
	case "ByteLevel":
		b := struct {
			TrimOffsets    *bool `json:"trim_offsets"`
			AddPrefixSpace *bool `json:"add_prefix_space"`
		}{}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing ByteLevel post_processor: %w", err)
		}
		p := &postProcessor{
			single: []piece{{seq: 0}},
			pair:   []piece{{seq: 0}, {seq: 1, typeID: 1}},
			trim:   true, prefixSpace: true,
		}
		if b.TrimOffsets != nil {
			p.trim = *b.TrimOffsets
		}
		if b.AddPrefixSpace != nil {
			p.prefixSpace = *b.AddPrefixSpace
		}
		return p, nil
	case "RobertaProcessing":
		var rp struct {
			Sep            [2]json.RawMessage `json:"sep"`
			Cls            [2]json.RawMessage `json:"cls"`
			TrimOffsets    *bool              `json:"trim_offsets"`
			AddPrefixSpace *bool              `json:"add_prefix_space"`
		}
		if err := json.Unmarshal(raw, &rp); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing RobertaProcessing: %w", err)
		}
		cls, err := tokenPair(rp.Cls)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: RobertaProcessing cls: %w", err)
		}
		sep, err := tokenPair(rp.Sep)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: RobertaProcessing sep: %w", err)
		}
		// processors/roberta.rs: <s> A </s> and <s> A </s> </s> B </s>, all
		// with type id 0 (B's too, with or without special tokens, as the
		// Rust core's goldens show).
		p := &postProcessor{
			single: []piece{cls, {seq: 0}, sep},
			pair:   []piece{cls, {seq: 0}, sep, sep, {seq: 1}, sep},
			trim:   true, prefixSpace: true,
		}
		if rp.TrimOffsets != nil {
			p.trim = *rp.TrimOffsets
		}
		if rp.AddPrefixSpace != nil {
			p.prefixSpace = *rp.AddPrefixSpace
		}
		return p, nil
	case "Sequence":
		return parseSequencePost(raw)
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
func (p *postProcessor) apply(a, b []token, addSpecial bool, texts [2]string) Encoding {
	tpl := p.single
	if b != nil {
		tpl = p.pair
	}
	seqs := [2][]token{a, b}
	if p.trim {
		p.trimOffsets(a, texts[0])
		p.trimOffsets(b, texts[1])
	}
	n := 0
	for _, pc := range tpl {
		if pc.seq >= 0 {
			n += len(seqs[pc.seq])
		} else if addSpecial {
			n += len(pc.ids)
		}
	}
	e := newEncoding(n)
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

// trimOffsets drops from a token's offsets the spaces that begin or end
// its text (byte-level spaces and whitespace), but not the leading one of
// the first token when add_prefix_space put it there
// (processors/byte_level.rs process_offsets). The Rust core counts them in
// characters of text, as its npm binding's offsets show: a lone prefix
// space before "ප" (aligned to the whole character) trims to the end of
// it, not to one byte in.
func (p *postProcessor) trimOffsets(ts []token, text string) {
	isSpace := func(r rune) bool { return r == byteChar[' '] || unicode.IsSpace(r) }
	for i := range ts {
		t := &ts[i]
		lead, trail := 0, 0
		for _, r := range t.text {
			if !isSpace(r) {
				break
			}
			lead++
		}
		for s := t.text; s != ""; {
			r, size := utf8.DecodeLastRuneInString(s)
			if !isSpace(r) {
				break
			}
			trail++
			s = s[:len(s)-size]
		}
		if lead == 1 && p.prefixSpace && (i == 0 || t.start == 0) {
			lead = 0 // the space add_prefix_space put there
		}
		if lead > 0 {
			t.start = min(forward(text, t.start, lead), t.end)
		}
		if trail > 0 && utf8.RuneCountInString(text[:min(t.end, len(text))]) >= trail {
			t.end = max(back(text, t.end, trail), t.start)
		}
	}
}

// forward moves byte offset i of text on by n characters; back moves it
// back by n.
func forward(text string, i, n int) int {
	for ; n > 0 && i < len(text); n-- {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return i + n
}

func back(text string, i, n int) int {
	i = min(i, len(text))
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(text[:i])
		i -= size
	}
	return i
}

// parseSequencePost reads a Sequence of post-processors as Llama 3's
// tokenizer.json has it: ByteLevel (offsets only) and at most one
// processor that adds special tokens. Run in turn they come to the same as
// the template with ByteLevel's offset trimming (processors/sequence.rs).
func parseSequencePost(raw json.RawMessage) (*postProcessor, error) {
	var sj struct {
		Processors []json.RawMessage `json:"processors"`
	}
	if err := json.Unmarshal(raw, &sj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing Sequence post_processor: %w", err)
	}
	var out *postProcessor
	trim, prefixSpace, byteLevel := false, false, false
	for _, r := range sj.Processors {
		ty, err := componentType("post_processor", r)
		if err != nil {
			return nil, err
		}
		p, err := parsePostProcessor(r)
		if err != nil {
			return nil, err
		}
		switch {
		case p == nil:
		case ty == "ByteLevel":
			byteLevel = true
			trim, prefixSpace = trim || p.trim, p.prefixSpace
		case out != nil:
			return nil, fmt.Errorf("%w: Sequence post_processor with two that add tokens", ErrUnsupported)
		default:
			out = p
		}
	}
	if out == nil {
		out = &postProcessor{single: []piece{{seq: 0}}, pair: []piece{{seq: 0}, {seq: 1, typeID: 1}}}
	}
	if byteLevel && trim {
		out.trim, out.prefixSpace = true, prefixSpace
	}
	return out, nil
}
