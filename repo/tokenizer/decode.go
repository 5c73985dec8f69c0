package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder turns tokens back into text pieces (decoders/mod.rs
// decode_chain); Decode joins what the last one returns.
type decoder interface {
	decodeChain(tokens []string) []string
}

// Decode turns ids back into text as the Rust core's Tokenizer::decode
// does: each id becomes its added token or vocabulary token (unknown ids
// are dropped), special added tokens are left out when skipSpecial, and the
// file's decoder joins them (without one, they are joined with spaces).
func (t *Tokenizer) Decode(ids []int64, skipSpecial bool) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.addedByID[id]
		if !ok {
			if tok, ok = t.model.idToToken(id); !ok {
				continue
			}
		}
		if skipSpecial && t.special[tok] {
			continue
		}
		tokens = append(tokens, tok)
	}
	if t.dec == nil {
		return strings.Join(tokens, " ")
	}
	return strings.Join(t.dec.decodeChain(tokens), "")
}

func parseDecoder(raw json.RawMessage) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	ty, err := componentType("decoder", raw)
	if err != nil {
		return nil, err
	}
	var d struct {
		Prefix        *string           `json:"prefix"`
		Cleanup       *bool             `json:"cleanup"`
		Suffix        *string           `json:"suffix"`
		Replacement   string            `json:"replacement"`
		PrependScheme *string           `json:"prepend_scheme"`
		AddPrefix     *bool             `json:"add_prefix_space"`
		Content       string            `json:"content"`
		Start         int               `json:"start"`
		Stop          int               `json:"stop"`
		Decoders      []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing %s decoder: %w", ty, err)
	}
	switch ty {
	case "WordPiece":
		w := wordPieceDec{prefix: "##", cleanup: true}
		if d.Prefix != nil {
			w.prefix = *d.Prefix
		}
		if d.Cleanup != nil {
			w.cleanup = *d.Cleanup
		}
		return w, nil
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "Metaspace":
		m := metaspaceDec{repl: '▁', strip: true}
		if d.Replacement != "" {
			r, size := utf8.DecodeRuneInString(d.Replacement)
			if size != len(d.Replacement) {
				return nil, fmt.Errorf("tokenizer: Metaspace decoder replacement %q is not one character", d.Replacement)
			}
			m.repl = r
		}
		// prepend_scheme wins over the older add_prefix_space.
		if d.PrependScheme != nil {
			m.strip = *d.PrependScheme != "never"
		} else if d.AddPrefix != nil {
			m.strip = *d.AddPrefix
		}
		return m, nil
	case "BPEDecoder":
		b := bpeDec{suffix: "</w>"}
		if d.Suffix != nil {
			b.suffix = *d.Suffix
		}
		return b, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		r, size := utf8.DecodeRuneInString(d.Content)
		if size == 0 || size != len(d.Content) || d.Start < 0 || d.Stop < 0 {
			return nil, fmt.Errorf("tokenizer: Strip decoder content %q, start %d, stop %d", d.Content, d.Start, d.Stop)
		}
		return stripDec{content: r, start: d.Start, stop: d.Stop}, nil
	case "Replace":
		return parseReplace("decoder", raw)
	case "Sequence":
		var seq sequenceDec
		for _, r := range d.Decoders {
			sub, err := parseDecoder(r)
			if err != nil {
				return nil, err
			}
			if sub != nil {
				seq = append(seq, sub)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: decoder type %q", ErrUnsupported, ty)
}

// wordPieceDec is decoders/wordpiece.rs: pieces after the first lose the
// prefix or gain a leading space; cleanup undoes BERT's spacing of
// punctuation and contractions.
type wordPieceDec struct {
	prefix  string
	cleanup bool
}

func (w wordPieceDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		if i != 0 {
			if s, ok := strings.CutPrefix(t, w.prefix); ok {
				t = s
			} else {
				t = " " + t
			}
		}
		if w.cleanup {
			t = cleanupChain(t)
		}
		tokens[i] = t
	}
	return tokens
}

// cleanupChain applies wordpiece.rs cleanup's replacements one after
// another, as its chain of str::replace calls does (a single
// strings.Replacer pass would differ on overlaps such as " ' s").
func cleanupChain(s string) string {
	if !strings.Contains(s, " ") {
		return s
	}
	for _, p := range [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
		{" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}} {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// byteLevelDec maps GPT-2's byte characters back to bytes over all tokens
// (a token with any other character keeps its UTF-8 bytes), then reads the
// bytes as UTF-8 with U+FFFD for invalid sequences.
type byteLevelDec struct{}

var charByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteChar {
		m[r] = byte(b)
	}
	return m
}()

func (byteLevelDec) decodeChain(tokens []string) []string {
	var buf []byte
	for _, t := range tokens {
		mark := len(buf)
		for _, r := range t {
			b, ok := charByte[r]
			if !ok {
				buf = append(buf[:mark], t...)
				break
			}
			buf = append(buf, b)
		}
	}
	return []string{lossyUTF8(buf)}
}

// metaspaceDec turns the replacement character back into spaces, dropping
// those of the first token unless prepend_scheme is never
// (pre_tokenizers/metaspace.rs).
type metaspaceDec struct {
	repl  rune
	strip bool
}

func (m metaspaceDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		if i == 0 && m.strip {
			tokens[i] = strings.ReplaceAll(t, string(m.repl), "")
		} else {
			tokens[i] = strings.ReplaceAll(t, string(m.repl), " ")
		}
	}
	return tokens
}

// bpeDec is decoders/bpe.rs: the end-of-word suffix becomes a space, or
// nothing in the last token.
type bpeDec struct{ suffix string }

func (b bpeDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		repl := " "
		if i == len(tokens)-1 {
			repl = ""
		}
		if b.suffix != "" {
			tokens[i] = strings.ReplaceAll(t, b.suffix, repl)
		}
	}
	return tokens
}

// byteFallbackDec is decoders/byte_fallback.rs: runs of <0xXX> tokens
// become their bytes as UTF-8, or one U+FFFD per byte when invalid.
type byteFallbackDec struct{}

func (byteFallbackDec) decodeChain(tokens []string) []string {
	out := tokens[:0:0]
	var bytes []byte
	flush := func() {
		if len(bytes) == 0 {
			return
		}
		if utf8.Valid(bytes) {
			out = append(out, string(bytes))
		} else {
			for range bytes {
				out = append(out, "\uFFFD")
			}
		}
		bytes = bytes[:0]
	}
	for _, t := range tokens {
		if len(t) == 6 && strings.HasPrefix(t, "<0x") && t[5] == '>' {
			// Rust's u8::from_str_radix also takes a leading '+'.
			if b, err := strconv.ParseUint(strings.TrimPrefix(t[3:5], "+"), 16, 8); err == nil {
				bytes = append(bytes, byte(b))
				continue
			}
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// fuseDec joins all tokens into one.
type fuseDec struct{}

func (fuseDec) decodeChain(tokens []string) []string { return []string{strings.Join(tokens, "")} }

// stripDec removes up to start leading and stop trailing content
// characters from each token (decoders/strip.rs).
type stripDec struct {
	content     rune
	start, stop int
}

func (s stripDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		rs := []rune(t)
		from := 0
		for from < s.start && from < len(rs) && rs[from] == s.content {
			from++
		}
		to := len(rs)
		for k := 0; k < s.stop && to > from && rs[to-1] == s.content; k++ {
			to--
		}
		tokens[i] = string(rs[from:to])
	}
	return tokens
}

type sequenceDec []decoder

func (s sequenceDec) decodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal invalid
// subpart (a lead byte and the continuation bytes that could still have
// completed it) becomes one U+FFFD. strings.ToValidUTF8 would merge runs.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[i : i+size])
			i += size
			continue
		}
		sb.WriteString("\uFFFD")
		i += invalidSubpart(b[i:])
	}
	return sb.String()
}

// invalidSubpart is the length of the maximal subpart at the start of b,
// which does not begin a valid character (at least 1).
func invalidSubpart(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

// TokenToID returns the id of a token's text: an added token's, else the
// vocabulary's (for finding a pad or stop token by its text).
func (t *Tokenizer) TokenToID(token string) (int64, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.model.vocabulary()[token]
	return id, ok
}

// IDToToken returns the text of an id's token: the added token's, else the
// vocabulary's.
func (t *Tokenizer) IDToToken(id int64) (string, bool) {
	if s, ok := t.addedByID[id]; ok {
		return s, true
	}
	return t.model.idToToken(id)
}
