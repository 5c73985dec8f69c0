package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// MaxFileSize bounds the tokenizer.json Load reads; real files are a few
// MiB (a 250k-token vocabulary is about 17 MiB).
const MaxFileSize = 64 << 20

var (
	// ErrUnsupported marks a tokenizer.json that uses a component this
	// package does not implement; the error text names it.
	ErrUnsupported = errors.New("tokenizer: unsupported")
	// ErrTooLarge marks a file over MaxFileSize.
	ErrTooLarge = errors.New("tokenizer: file too large")
)

// AddedToken is one entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Truncation is tokenizer.json's truncation section.
type Truncation struct {
	MaxLength int    `json:"max_length"`
	Strategy  string `json:"strategy"`  // LongestFirst, OnlyFirst or OnlySecond
	Direction string `json:"direction"` // Right or Left
	Stride    int    `json:"stride"`
}

// Padding is tokenizer.json's padding section, or what Pad is asked to
// do. Fixed is 0 for BatchLongest; Direction is "Right" or "Left".
type Padding struct {
	Fixed           int
	Direction       string
	PadToMultipleOf int
	PadID           int64
	PadTypeID       int64
	PadToken        string
}

type paddingJSON struct {
	Strategy        json.RawMessage `json:"strategy"`
	Direction       string          `json:"direction"`
	PadToMultipleOf *int            `json:"pad_to_multiple_of"`
	PadID           int64           `json:"pad_id"`
	PadTypeID       int64           `json:"pad_type_id"`
	PadToken        string          `json:"pad_token"`
}

type fileJSON struct {
	Truncation    *Truncation     `json:"truncation"`
	Padding       *paddingJSON    `json:"padding"`
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type typed struct {
	Type string `json:"type"`
}

// Load reads and parses a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, path, fi.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse parses the contents of a tokenizer.json file.
func Parse(data []byte) (*Tokenizer, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxFileSize)
	}
	var fj fileJSON
	if err := json.Unmarshal(data, &fj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing tokenizer.json: %w", err)
	}
	t := &Tokenizer{added: fj.AddedTokens, scratch: &sync.Pool{}}
	var err error
	if t.model, err = parseModel(fj.Model); err != nil {
		return nil, err
	}
	if t.norm, err = parseNormalizer(fj.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(fj.PreTokenizer); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(fj.PostProcessor); err != nil {
		return nil, err
	}
	if t.dec, err = parseDecoder(fj.Decoder); err != nil {
		return nil, err
	}
	if t.trunc, err = checkTruncation(fj.Truncation); err != nil {
		return nil, err
	}
	if t.pad, err = parsePadding(fj.Padding); err != nil {
		return nil, err
	}
	t.build()
	return t, nil
}

// isNull reports whether a component is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func componentType(kind string, raw json.RawMessage) (string, error) {
	var ty typed
	if err := json.Unmarshal(raw, &ty); err != nil {
		return "", fmt.Errorf("tokenizer: parsing %s: %w", kind, err)
	}
	return ty.Type, nil
}

func parseModel(raw json.RawMessage) (model, error) {
	if isNull(raw) {
		return nil, errors.New("tokenizer: tokenizer.json has no model")
	}
	ty, err := componentType("model", raw)
	if err != nil {
		return nil, err
	}
	if ty == "" {
		// Older files leave the model's type out; the Rust core then
		// tells the models apart by their fields (an untagged enum).
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing model: %w", err)
		}
		if _, ok := fields["merges"]; ok {
			ty = "BPE"
		} else if _, ok := fields["max_input_chars_per_word"]; ok {
			ty = "WordPiece"
		} else if _, ok := fields["unk_id"]; ok {
			ty = "Unigram"
		}
	}
	switch ty {
	case "WordPiece":
		return parseWordPiece(raw)
	case "BPE":
		return parseBPE(raw)
	case "Unigram":
		return parseUnigram(raw)
	case "WordLevel":
		return parseWordLevel(raw)
	}
	return nil, fmt.Errorf("%w: model type %q", ErrUnsupported, ty)
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	ty, err := componentType("normalizer", raw)
	if err != nil {
		return nil, err
	}
	switch ty {
	case "BertNormalizer":
		return parseBertNormalizer(raw)
	case "NFC":
		return newUnicodeForm(norm.NFC), nil
	case "NFD":
		return newUnicodeForm(norm.NFD), nil
	case "NFKC":
		return newUnicodeForm(norm.NFKC), nil
	case "NFKD":
		return newUnicodeForm(norm.NFKD), nil
	case "Lowercase":
		return runeMap{lower: true}, nil
	case "StripAccents":
		return runeMap{strip: true}, nil
	case "Replace":
		return parseReplace("normalizer", raw)
	case "Strip", "Prepend", "Precompiled":
		return parseNormalizerArgs(ty, raw)
	case "Sequence":
		var sj struct {
			Norms []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &sj); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing Sequence normalizer: %w", err)
		}
		var seq sequenceNorm
		for _, r := range sj.Norms {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: normalizer type %q", ErrUnsupported, ty)
}

func parseBertNormalizer(raw json.RawMessage) (*bertNormalizer, error) {
	var n struct {
		CleanText          *bool `json:"clean_text"`
		HandleChineseChars *bool `json:"handle_chinese_chars"`
		StripAccents       *bool `json:"strip_accents"`
		Lowercase          *bool `json:"lowercase"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing BertNormalizer: %w", err)
	}
	// Defaults as huggingface/tokenizers normalizers/bert.rs.
	b := &bertNormalizer{cleanText: true, chinese: true, lowercase: true}
	if n.CleanText != nil {
		b.cleanText = *n.CleanText
	}
	if n.HandleChineseChars != nil {
		b.chinese = *n.HandleChineseChars
	}
	if n.Lowercase != nil {
		b.lowercase = *n.Lowercase
	}
	b.stripAccents = b.lowercase // null follows lowercase
	if n.StripAccents != nil {
		b.stripAccents = *n.StripAccents
	}
	return b, nil
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	ty, err := componentType("pre_tokenizer", raw)
	if err != nil {
		return nil, err
	}
	switch ty {
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "Split":
		return parseSplit(raw)
	case "Whitespace":
		return whitespacePre{}, nil
	case "Metaspace":
		return parseMetaspace(raw)
	case "WhitespaceSplit", "Digits", "Punctuation":
		return parseCharSplit(ty, raw)
	case "Sequence":
		var sj struct {
			Pre []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &sj); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing Sequence pre_tokenizer: %w", err)
		}
		var seq sequencePre
		for _, r := range sj.Pre {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "ByteLevel":
		// Defaults as pre_tokenizers/byte_level.rs ByteLevel::default.
		b := struct {
			AddPrefixSpace *bool `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}{}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("tokenizer: parsing ByteLevel pre_tokenizer: %w", err)
		}
		p := &byteLevel{addPrefixSpace: true, useRegex: true}
		if b.AddPrefixSpace != nil {
			p.addPrefixSpace = *b.AddPrefixSpace
		}
		if b.UseRegex != nil {
			p.useRegex = *b.UseRegex
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w: pre_tokenizer type %q", ErrUnsupported, ty)
}

func checkTruncation(tr *Truncation) (*Truncation, error) {
	if tr == nil {
		return nil, nil
	}
	switch tr.Strategy {
	case "", "LongestFirst", "OnlyFirst", "OnlySecond":
	default:
		return nil, fmt.Errorf("%w: truncation strategy %q", ErrUnsupported, tr.Strategy)
	}
	switch tr.Direction {
	case "", "Right", "Left":
	default:
		return nil, fmt.Errorf("%w: truncation direction %q", ErrUnsupported, tr.Direction)
	}
	if tr.MaxLength < 0 || tr.Stride < 0 {
		return nil, fmt.Errorf("tokenizer: truncation max_length %d, stride %d", tr.MaxLength, tr.Stride)
	}
	if tr.Strategy == "" {
		tr.Strategy = "LongestFirst"
	}
	if tr.Direction == "" {
		tr.Direction = "Right"
	}
	return tr, nil
}

func parsePadding(pj *paddingJSON) (*Padding, error) {
	if pj == nil {
		return nil, nil
	}
	p := &Padding{Direction: pj.Direction, PadID: pj.PadID, PadTypeID: pj.PadTypeID, PadToken: pj.PadToken}
	switch p.Direction {
	case "Right", "Left":
	case "":
		p.Direction = "Right"
	default:
		return nil, fmt.Errorf("%w: padding direction %q", ErrUnsupported, p.Direction)
	}
	if pj.PadToMultipleOf != nil {
		p.PadToMultipleOf = *pj.PadToMultipleOf
	}
	var name string
	var fixed struct {
		Fixed *int `json:"Fixed"`
	}
	switch {
	case json.Unmarshal(pj.Strategy, &name) == nil && name == "BatchLongest":
	case json.Unmarshal(pj.Strategy, &fixed) == nil && fixed.Fixed != nil && *fixed.Fixed >= 0:
		p.Fixed = *fixed.Fixed
	default:
		return nil, fmt.Errorf("%w: padding strategy %s", ErrUnsupported, pj.Strategy)
	}
	return p, nil
}

// parseNormalizerArgs reads the normalizers with arguments other than
// Replace: Strip, Prepend and Precompiled.
func parseNormalizerArgs(ty string, raw json.RawMessage) (normalizer, error) {
	var a struct {
		Left    *bool   `json:"strip_left"`
		Right   *bool   `json:"strip_right"`
		Prepend string  `json:"prepend"`
		Charmap *string `json:"precompiled_charsmap"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing %s normalizer: %w", ty, err)
	}
	switch ty {
	case "Strip":
		// Both default to true (normalizers/strip.rs serialization).
		s := stripNorm{left: a.Left == nil || *a.Left, right: a.Right == nil || *a.Right}
		return s, nil
	case "Prepend":
		return prependNorm{s: a.Prepend}, nil
	}
	if a.Charmap == nil || *a.Charmap == "" {
		return nil, nil // no rules: nothing to do
	}
	p, err := parsePrecompiled(*a.Charmap)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: Precompiled normalizer: %w", err)
	}
	return p, nil
}
