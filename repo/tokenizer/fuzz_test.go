package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode checks, on every test tokenizer, that Encode and EncodePair
// never panic, that every id is in the vocabulary, and that the offsets of
// each sequence lie within its text and never go backwards. The seeds are
// the golden inputs of testdata/cases.json and some invalid UTF-8 (which
// the Rust core cannot be given, but a Go string can hold).
func FuzzEncode(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cases map[string][]goldenCase
	if err := json.Unmarshal(data, &cases); err != nil {
		f.Fatal(err)
	}
	for _, list := range cases {
		for _, c := range list {
			b := ""
			if c.B != nil {
				b = *c.B
			}
			f.Add(c.A, b, c.B != nil)
		}
	}
	f.Add("\xff\xfe invalid \xc3", "\xe2\x82", true)
	var toks []*Tokenizer
	for _, name := range []string{"small-wordpiece.json", "all-minilm-l6-v2.json", "small-bpe.json", "small-bpe-template.json", "small-roberta.json", "small-bpe-qwen2.json", "small-bpe-llama3.json", "small-wordpiece-seq.json", "small-bpe-nfkc.json", "small-wordpiece-split.json", "small-wordpiece-ws.json", "small-bpe-metaspace.json", "small-bpe-metaspace-split.json",
		"small-unigram-xlmr.json", "small-unigram-xlmr-legacy.json", "small-unigram-bytefb.json", "small-bpe-llama2.json", "small-bpe-llama3-seq.json", "small-bpe-seq-trim.json", "small-wordlevel.json", "small-bpe-clip.json", "small-bpe-wp.json"} {
		tok, err := Load(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, a, b string, pair bool) {
		for _, tok := range toks {
			for _, special := range []bool{true, false} {
				var enc Encoding
				var err error
				if pair {
					enc, err = tok.EncodePair(a, b, special)
				} else {
					enc, err = tok.Encode(a, special)
				}
				if err != nil {
					continue // ErrSequenceTooShort cannot happen with LongestFirst
				}
				checkEncoding(t, tok, enc, [2]string{a, b}, sequences(tok, enc, pair, special))
				// Decode takes any ids: the encoding's, and ids made of the
				// input's bytes (some out of the vocabulary).
				for _, skip := range []bool{false, true} {
					if out := tok.Decode(enc.IDs, skip); !utf8.ValidString(out) && utf8.ValidString(a) && utf8.ValidString(b) {
						t.Fatalf("Decode of %v gives invalid UTF-8 %q", enc.IDs, out)
					}
				}
				ids := make([]int64, 0, len(a))
				for i := 0; i+1 < len(a); i += 2 {
					ids = append(ids, int64(a[i])<<8|int64(a[i+1])-300)
				}
				_ = tok.Decode(ids, special)
				// Unknown ids emit nothing and grow the stream's window
				// (quadratic, as in the Rust core): only a few of them.
				ds := tok.NewDecodeStream(special)
				for _, id := range append(enc.IDs, ids[:min(len(ids), 32)]...) {
					if _, _, err := ds.Step(id); err != nil && !errors.Is(err, ErrStreamPrefix) {
						t.Fatalf("Step(%d): %v", id, err)
					}
				}
			}
		}
	})
}

// sequences says which text each token came from: its type id, unless
// the pair template gives B type id 0 too (RoBERTa); then the template is
// walked (the only tokens marked Special are the template's), and without
// special tokens, where A and B are adjacent, it cannot tell (nil).
func sequences(tok *Tokenizer, enc Encoding, pair, special bool) []int64 {
	if !pair {
		return make([]int64, enc.Len())
	}
	p := tok.post
	bType := int64(1)
	if p != nil {
		for _, pc := range p.pair {
			if pc.seq == 1 {
				bType = pc.typeID
			}
		}
	}
	if bType == 1 {
		return enc.TypeIDs
	}
	if !special {
		return nil
	}
	seq := make([]int64, enc.Len())
	i := 0
	for _, pc := range p.pair {
		if pc.seq < 0 {
			i += len(pc.ids)
			continue
		}
		for ; i < enc.Len() && !enc.Special[i]; i++ {
			seq[i] = int64(pc.seq)
		}
	}
	return seq
}

func checkEncoding(t *testing.T, tok *Tokenizer, enc Encoding, texts [2]string, seqs []int64) {
	t.Helper()
	n := enc.Len()
	if len(enc.TypeIDs) != n || len(enc.AttentionMask) != n || len(enc.Tokens) != n || len(enc.Offsets) != n || len(enc.Special) != n {
		t.Fatalf("ragged encoding %+v", enc)
	}
	if max := tok.MaxLength(); max > 0 && n > max {
		t.Fatalf("%d tokens over max_length %d", n, max)
	}
	vocab := int64(tok.VocabSize())
	// Ends never go back, nor do the starts of non-empty tokens. An empty
	// one may start past the next: the Rust core trims a lone byte-level
	// prefix space after an added token to the end of the character at n,
	// before a token at n.
	lastStart, lastEnd := [2]int{}, [2]int{}
	for i, id := range enc.IDs {
		if id < 0 || id >= vocab {
			t.Fatalf("id %d outside the vocabulary (%d)", id, vocab)
		}
		if enc.Special[i] {
			continue
		}
		off := enc.Offsets[i]
		if seqs == nil {
			if off[0] < 0 || off[0] > off[1] || off[1] > max(len(texts[0]), len(texts[1])) {
				t.Fatalf("token %d %q offsets %v outside both texts", i, enc.Tokens[i], off)
			}
			continue
		}
		seq := seqs[i]
		if off[0] < 0 || off[0] > off[1] || off[1] > len(texts[seq]) {
			t.Fatalf("token %d %q offsets %v outside %q", i, enc.Tokens[i], off, texts[seq])
		}
		if off[1] < lastEnd[seq] || off[0] < off[1] && off[0] < lastStart[seq] {
			t.Fatalf("token %d %q offsets %v go back from [%d %d]", i, enc.Tokens[i], off, lastStart[seq], lastEnd[seq])
		}
		lastEnd[seq] = off[1]
		if off[0] < off[1] {
			lastStart[seq] = off[0]
		}
	}
}

// BenchmarkEncode encodes about 1 KiB of mixed text (English with some
// accents, CJK and punctuation) with all-MiniLM-L6-v2's tokenizer.json,
// its truncation (256 tokens) turned off so the whole text is encoded.
func BenchmarkEncode(b *testing.B) {
	tok, err := Load(filepath.Join("testdata", "all-minilm-l6-v2.json"))
	if err != nil {
		b.Fatal(err)
	}
	tok.trunc = nil
	text := strings.Repeat("The café's naïve owner said: \"Inference at 3.5x speed!\" 日本語 ok. ", 16)[:1024]
	for !utf8.ValidString(text) {
		text = text[:len(text)-1]
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Encode(text, true); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzPrecompiled checks that any precompiled_charsmap either fails to
// load with ErrCharsmap or normalizes any text without panicking, with an
// alignment for every output byte inside the input.
func FuzzPrecompiled(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "small-unigram-xlmr-legacy.json"))
	if err != nil {
		f.Fatal(err)
	}
	var doc struct {
		Normalizer struct {
			Charsmap string `json:"precompiled_charsmap"`
		} `json:"normalizer"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		f.Fatal(err)
	}
	real, err := base64.StdEncoding.DecodeString(doc.Normalizer.Charsmap)
	if err != nil || len(real) < 4096 {
		f.Fatalf("charsmap of %d bytes: %v", len(real), err)
	}
	f.Add(real, "ﬁ½ＡＢＣ e\u0301 \u200b x")
	f.Add(real[:4096], "abc")
	f.Add([]byte{8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 'a', 0}, "a\x00b")
	f.Add([]byte{4, 0, 0, 0}, "")
	f.Fuzz(func(t *testing.T, charsmap []byte, text string) {
		p, err := parsePrecompiled(base64.StdEncoding.EncodeToString(charsmap))
		if err != nil {
			if !errors.Is(err, ErrCharsmap) {
				t.Fatalf("error %v does not wrap ErrCharsmap", err)
			}
			return
		}
		n := aligned(p.normalize(text, 3), 3)
		if len(n.align) != len(n.s) {
			t.Fatalf("%d alignments for %d bytes", len(n.align), len(n.s))
		}
		for _, sp := range n.align {
			if sp.start < 3 || sp.end > len(text)+3 || sp.start > sp.end {
				t.Fatalf("alignment %v outside [3, %d]", sp, len(text)+3)
			}
		}
	})
}
