package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalized is text after normalization, with for each of its bytes the
// byte range of the original text it came from, so that offsets are
// reported in the caller's string (as NormalizedString's alignments in
// huggingface/tokenizers tokenizer/normalizer.rs).
type normalized struct {
	s     string
	align []span
	ident bool // made by identity or unchanged: s is the step's input
}

// unchanged is what a normalizer that changed nothing returns: the text
// with no alignment yet (aligned makes it).
func unchanged(text string) normalized { return normalized{s: text, ident: true} }

// aligned gives n its alignment if it has none: it is then text from
// byte base on, unchanged.
func aligned(n normalized, base int) normalized {
	if n.align == nil && n.s != "" {
		return identity(n.s, base)
	}
	return n
}

type span struct{ start, end int }

// bertNormalizer is huggingface/tokenizers normalizers/bert.rs.
type bertNormalizer struct {
	cleanText, chinese, stripAccents, lowercase bool
}

// builder accumulates normalized text and its alignment.
type builder struct {
	out   []byte
	align []span
}

func (b *builder) add(r rune, sp span) {
	n := len(b.out)
	b.out = utf8.AppendRune(b.out, r)
	for ; n < len(b.out); n++ {
		b.align = append(b.align, sp)
	}
}

// normalize maps text (which starts at byte base of the original input)
// rune by rune; every output byte of a rune aligns to that rune.
func (bn *bertNormalizer) normalize(text string, base int) normalized {
	c := len(text) + len(text)/2 + 8 // CJK characters gain two spaces
	b := builder{out: make([]byte, 0, c), align: make([]span, 0, c)}
	var dec [utf8.UTFMax * 8]byte
	var enc [utf8.UTFMax]byte
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		sp := span{base + i, base + i + size}
		i += size
		if bn.cleanText {
			if r == 0 || r == utf8.RuneError || isControl(r) {
				continue // U+FFFD is dropped too, as bert.rs does
			}
			if isWhitespace(r) {
				r = ' '
			}
		}
		chinese := bn.chinese && r >= 0x3400 && isChinese(r)
		if chinese {
			b.add(' ', sp)
		}
		if bn.stripAccents && r >= 0x80 {
			e := enc[:utf8.EncodeRune(enc[:], r)]
			// The tables hold full canonical decompositions; Hangul
			// syllables decompose algorithmically.
			d := norm.NFD.Properties(e).Decomposition()
			if o, ok := rustNFD[r]; ok {
				d = []byte(o)
			} else if r >= 0xAC00 && r <= 0xD7A3 {
				d = norm.NFD.Append(dec[:0], e...)
			} else if d == nil {
				d = e
			}
			for len(d) > 0 {
				c, n := utf8.DecodeRune(d)
				d = d[n:]
				if !isRustMn(c) {
					bn.addLower(&b, c, sp)
				}
			}
		} else {
			bn.addLower(&b, r, sp)
		}
		if chinese {
			b.add(' ', sp)
		}
	}
	return normalized{s: string(b.out), align: b.align}
}

func (bn *bertNormalizer) addLower(b *builder, r rune, sp span) {
	switch {
	case !bn.lowercase:
		b.add(r, sp)
	case r < 0x80:
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.add(r, sp)
	case r == 'İ': // Rust's char::to_lowercase: U+0130 becomes two chars
		b.add('i', sp)
		if !bn.stripAccents {
			b.add('\u0307', sp)
		}
	default:
		b.add(unicode.ToLower(r), sp)
	}
}

// isWhitespace is bert.rs is_whitespace: Rust's char::is_whitespace
// (Unicode White_Space, which unicode.IsSpace follows).
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }

// isControl is bert.rs is_control: categories Cc, Cf and Co (Cs cannot
// occur in valid UTF-8), with tab, newline and carriage return counted as
// whitespace instead. bert.rs's comment also names Cn, but the Rust core
// keeps unassigned code points (U+0378, U+10FFFF: checked against its npm
// binding), so they are kept here too.
func isControl(r rune) bool {
	if r < 0x80 {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
	}
	return isRustOtherControl(r)
}

// isChinese is bert.rs is_chinese_char: the CJK Unified Ideographs blocks.
func isChinese(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF,
		r >= 0x20000 && r <= 0x2A6DF, r >= 0x2A700 && r <= 0x2B73F,
		r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// isBertPunct is pre_tokenizers/bert.rs is_bert_punc: ASCII punctuation
// (which includes symbols such as $ and +) or Unicode punctuation (P*).
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return r >= '!' && r <= '/' || r >= ':' && r <= '@' || r >= '[' && r <= '`' || r >= '{' && r <= '~'
	}
	return isRustPunct(r)
}

// identity wraps text without normalizing it.
func identity(text string, base int) normalized {
	align := make([]span, 0, len(text))
	for i := range text {
		_, size := utf8.DecodeRuneInString(text[i:])
		for k := 0; k < size; k++ {
			align = append(align, span{base + i, base + i + size})
		}
	}
	return normalized{s: text, align: align, ident: true}
}

// runeMap is a normalizer that maps each character on its own: Lowercase
// (Rust's char::to_lowercase) or StripAccents (drops every combining mark,
// Mn, Mc and Me, without decomposing first, as normalizers/strip.rs does;
// BertNormalizer's strip_accents drops only Mn).
type runeMap struct{ lower, strip bool }

func (m runeMap) normalize(text string, base int) normalized {
	b := builder{out: make([]byte, 0, len(text)+8), align: make([]span, 0, len(text)+8)}
	lower := bertNormalizer{lowercase: true}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		sp := span{base + i, base + i + size}
		i += size
		switch {
		case m.strip && isRustMark(r):
		case m.lower:
			lower.addLower(&b, r, sp)
		default:
			b.add(r, sp)
		}
	}
	return normalized{s: string(b.out), align: b.align}
}

// keeper is a normalizer that can tell cheaply that it would leave a text
// as it is.
type keeper interface {
	keeps(text string) bool
}

// sequenceNorm applies normalizers in turn, each aligned through the last.
type sequenceNorm []normalizer

func (s sequenceNorm) normalize(text string, base int) normalized {
	n := unchanged(text)
	for _, step := range s {
		if k, ok := step.(keeper); ok && k.keeps(n.s) {
			continue // nothing to change (already in NFC, say)
		}
		next := step.normalize(n.s, 0)
		if next.ident {
			continue
		}
		if n.align == nil {
			// The first change: the steps before changed nothing.
			for i := range next.align {
				next.align[i].start += base
				next.align[i].end += base
			}
			n = next
			continue
		}
		for i, sp := range next.align {
			switch {
			case sp.end > sp.start:
				next.align[i] = span{n.align[sp.start].start, n.align[sp.end-1].end}
			case sp.start < len(n.align): // an insertion aligned to nothing
				next.align[i] = span{n.align[sp.start].start, n.align[sp.start].start}
			case len(n.align) > 0:
				next.align[i] = span{n.align[len(n.align)-1].end, n.align[len(n.align)-1].end}
			}
		}
		n = next
	}
	return aligned(n, base)
}
