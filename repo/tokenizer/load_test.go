package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimal = `{
 "added_tokens": [{"id": 0, "content": "[UNK]", "special": true}],
 "normalizer": NORM, "pre_tokenizer": PRE, "post_processor": POST, "decoder": DEC,
 "model": MODEL
}`

// doc fills minimal with the given key, value pairs, then the defaults.
func doc(kv ...string) string {
	out := minimal
	kv = append(kv,
		"NORM", `{"type": "BertNormalizer", "strip_accents": null, "lowercase": true}`,
		"PRE", `{"type": "BertPreTokenizer"}`,
		"POST", `null`,
		"DEC", `null`,
		"MODEL", `{"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1}}`)
	for i := 0; i+1 < len(kv); i += 2 {
		out = strings.Replace(out, kv[i], kv[i+1], 1)
	}
	return out
}

func TestParseRefusesUnknownTypes(t *testing.T) {
	for _, c := range []struct{ key, val, name string }{
		{"MODEL", `{"type": "WordLevel", "vocab": {"a": 0}}`, `WordLevel unk_token "<unk>" not in the vocabulary`},
		{"MODEL", `{"type": "Nope", "vocab": {}}`, `model type "Nope"`},
		{"MODEL", `{"type": "Unigram", "vocab": [["a", 0]]}`, `Unigram without unk_id`},
		{"NORM", `{"type": "Nmt"}`, `normalizer type "Nmt"`},
		{"DEC", `{"type": "CTC"}`, `decoder type "CTC"`},
		{"DEC", `{"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Nope"}]}`, `decoder type "Nope"`},
		{"PRE", `{"type": "CharDelimiterSplit", "delimiter": "x"}`, `pre_tokenizer type "CharDelimiterSplit"`},
		{"PRE", `{"type": "Metaspace", "prepend_scheme": "sometimes"}`, `Metaspace prepend_scheme "sometimes"`},
		{"PRE", `{"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}`, `pre_tokenizer type "UnicodeScripts"`},
		{"PRE", `{"type": "Split", "pattern": {"String": " "}, "behavior": "Nope"}`, `Split behavior "Nope"`},
		{"NORM", `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "ByteLevel"}]}`, `normalizer type "ByteLevel"`},
		{"MODEL", `{"type": "BPE", "vocab": {}, "merges": [], "dropout": 0.1}`, `BPE dropout`},
		{"MODEL", `{"type": "BPE", "vocab": {}, "merges": [], "byte_fallback": true, "end_of_word_suffix": "</w>"}`, `byte_fallback with`},
		{"POST", `{"type": "Sequence", "processors": [{"type": "BertProcessing", "sep": ["a", 1], "cls": ["a", 1]}, {"type": "BertProcessing", "sep": ["a", 1], "cls": ["a", 1]}]}`, `two that add tokens`},
		{"POST", `{"type": "Sequence", "processors": [{"type": "Nope"}]}`, `post_processor type "Nope"`},
	} {
		_, err := Parse([]byte(doc(c.key, c.val)))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%s: err %v, want ErrUnsupported naming %s", c.key, c.val, err, c.name)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, data string }{
		{"not json", `{`},
		{"no model", `{"model": null}`},
		{"unk not in vocab", doc("MODEL", `{"type": "WordPiece", "unk_token": "<unk>", "vocab": {"a": 0}}`)},
		{"empty Unigram vocabulary", doc("MODEL", `{"type": "Unigram", "unk_id": 0, "vocab": []}`)},
		{"Unigram unk_id outside", doc("MODEL", `{"type": "Unigram", "unk_id": 1, "vocab": [["a", -1.5]]}`)},
		{"Unigram score not a number", doc("MODEL", `{"type": "Unigram", "unk_id": 0, "vocab": [["a", "x"]]}`)},
		{"charsmap not base64", doc("NORM", `{"type": "Precompiled", "precompiled_charsmap": "%%%"}`)},
		{"charsmap too short", doc("NORM", `{"type": "Precompiled", "precompiled_charsmap": "AAA="}`)},
		{"charsmap trie past the end", doc("NORM", `{"type": "Precompiled", "precompiled_charsmap": "/////wAAAAA="}`)},
		{"Replace without pattern", doc("NORM", `{"type": "Replace", "content": "x"}`)},
		{"Replace bad regex", doc("NORM", `{"type": "Replace", "pattern": {"Regex": "("}, "content": "x"}`)},
		{"Strip decoder of two characters", doc("DEC", `{"type": "Strip", "content": "ab", "start": 1, "stop": 0}`)},
		{"Metaspace decoder of two characters", doc("DEC", `{"type": "Metaspace", "replacement": "ab"}`)},
		{"template names undefined token", doc("POST", `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}], "pair": [], "special_tokens": {}}`)},
	} {
		if _, err := Parse([]byte(c.data)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := Parse([]byte(doc("POST", `null, "padding": {"strategy": "BatchLongest", "direction": "Up"}`))); !errors.Is(err, ErrUnsupported) {
		t.Errorf("bad padding direction: err %v", err)
	}
	if _, err := Parse([]byte(`{"model": null, "truncation": {"max_length": 4, "strategy": "Nope"}}`)); err == nil {
		t.Error("bad truncation strategy: no error")
	}
}

func TestLoadRefusesLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, MaxFileSize+1); err != nil { // sparse: nothing is written
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err %v", err)
	}
}

func TestLoadSections(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "small-wordpiece.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.MaxLength(); got != 12 {
		t.Errorf("MaxLength %d, want 12", got)
	}
	if tr := tok.Truncation(); tr == nil || tr.Strategy != "LongestFirst" || tr.Direction != "Right" {
		t.Errorf("Truncation %+v", tr)
	}
	if p := tok.Padding(); p == nil || p.Fixed != 16 || p.PadToken != "[PAD]" || p.Direction != "Right" {
		t.Errorf("Padding %+v", p)
	}
	added := tok.AddedTokens()
	if len(added) != 7 {
		t.Fatalf("%d added tokens, want 7", len(added))
	}
	want := AddedToken{ID: 34, Content: "<ent>", SingleWord: true, Normalized: true}
	if added[5] != want {
		t.Errorf("added[5] = %+v, want %+v (id reassigned after the vocabulary)", added[5], want)
	}
	if !added[4].LStrip || !added[4].Special || !added[6].RStrip {
		t.Errorf("flags lost: %+v", added)
	}
	if got := tok.VocabSize(); got != 36 {
		t.Errorf("VocabSize %d, want 36", got)
	}

	mini, err := Load(filepath.Join("testdata", "all-minilm-l6-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p := mini.Padding(); p == nil || p.Fixed != 0 || p.PadToMultipleOf != 8 {
		t.Errorf("BatchLongest padding %+v", p)
	}
	if mini.MaxLength() != 256 || mini.VocabSize() != 30522 {
		t.Errorf("MaxLength %d VocabSize %d", mini.MaxLength(), mini.VocabSize())
	}
}

func TestNoTruncationNoPostProcessor(t *testing.T) {
	tok, err := Parse([]byte(doc()))
	if err != nil {
		t.Fatal(err)
	}
	if tok.MaxLength() != 0 || tok.Truncation() != nil || tok.Padding() != nil {
		t.Error("sections absent from the file are reported")
	}
	enc, err := tok.EncodePair("A a", "a", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 1, 1}; !equal(enc.IDs, want) || !equal(enc.TypeIDs, []int64{0, 0, 1}) {
		t.Errorf("ids %v type ids %v", enc.IDs, enc.TypeIDs)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
