package tokenizer

import (
	"strings"
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

// unicodeNorm is the NFC, NFD, NFKC and NFKD normalizers. Within each
// segment norm.Iter returns (m input characters become k), the first
// output character aligns to the first input character and absorbs the
// m-k that follow it; the rest align one to one with the remaining input,
// and any extra output with the last. That is what the Rust core reports:
// "e\u0301" becomes NFC "é" over the "e" alone, and "a\u0308\u0323"
// becomes "\u1EA1\u0308" with the "\u0308" over the input's "\u0323".
type unicodeNorm struct{ form norm.Form }

// newUnicodeNorm builds a form as the Rust core does: every character
// decomposed on its own (its outputs align to it), then, for NFC and
// NFKC, recomposed segment by segment.
func newUnicodeNorm(form norm.Form) normalizer {
	switch form {
	case norm.NFC:
		return sequenceNorm{decompose{norm.NFD}, unicodeNorm{norm.NFC}}
	case norm.NFKC:
		return sequenceNorm{decompose{norm.NFKD}, unicodeNorm{norm.NFC}}
	}
	return decompose{form}
}

// decompose is NFD or NFKD, one character at a time (canonical
// reordering of marks across characters is not applied).
type decompose struct{ form norm.Form }

func (d decompose) normalize(text string, base int) normalized {
	if d.form.IsNormalString(text) {
		return unchanged(text)
	}
	b := builder{out: make([]byte, 0, len(text)+len(text)/2), align: make([]span, 0, len(text)+len(text)/2)}
	var dec [utf8.UTFMax * 18]byte
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		sp := span{base + i, base + i + size}
		e := text[i : i+size]
		i += size
		out := d.form.PropertiesString(e).Decomposition()
		if o, ok := d.override(r); ok {
			out = []byte(o)
		} else if r >= 0xAC00 && r <= 0xD7A3 {
			out = d.form.AppendString(dec[:0], e)
		}
		if out == nil {
			b.out = append(b.out, e...)
			for len(b.align) < len(b.out) {
				b.align = append(b.align, sp)
			}
			continue
		}
		for len(out) > 0 {
			c, n := utf8.DecodeRune(out)
			out = out[n:]
			b.add(c, sp)
		}
	}
	return normalized{s: string(b.out), align: b.align}
}

func (u unicodeNorm) normalize(text string, base int) normalized {
	return u.compose(text, base, nil)
}

// compose is normalize where inserted(p) says whether the character at
// byte p of text is not the first that its source character decomposed
// into. Such a character, composed with the marks after it, takes the
// place of the first mark, as the Rust core's alignments show: NFKC of
// "₨\u030C" is "Rš" with "š" over the "\u030C".
func (u unicodeNorm) compose(text string, base int, inserted func(p int) bool) normalized {
	if u.form.IsNormalString(text) {
		return unchanged(text)
	}
	out := make([]byte, 0, len(text)+len(text)/4)
	align := make([]span, 0, cap(out))
	var it norm.Iter
	it.InitString(u.form, text)
	var in []span
	for !it.Done() {
		p0 := it.Pos()
		seg := it.Next()
		if it.Pos() == p0 && len(in) > 0 {
			// The rest of a long expansion (NFKC "½" is "1⁄2"): it
			// aligns to the character that produced it.
			in = in[len(in)-1:]
		} else {
			in = in[:0]
		}
		for i := p0; i < it.Pos(); {
			_, size := utf8.DecodeRuneInString(text[i:])
			in = append(in, span{base + i, base + i + size})
			i += size
		}
		if len(in) == 0 {
			continue
		}
		if unknownComposite(seg, text[p0:it.Pos()]) {
			seg = []byte(text[p0:it.Pos()])
		}
		k := utf8.RuneCount(seg)
		shift := inserted != nil && k < len(in) && inserted(p0)
		for j := 0; len(seg) > 0; j++ {
			r, size := utf8.DecodeRune(seg)
			seg = seg[size:]
			idx := 0
			if j == 0 && shift {
				idx = 1
			}
			if j > 0 {
				idx = min(j+len(in)-k, len(in)-1)
				idx = max(idx, min(j, len(in)-1))
			}
			out = utf8.AppendRune(out, r)
			for len(align) < len(out) {
				align = append(align, in[idx])
			}
		}
	}
	return normalized{s: string(out), align: align}
}

// unknownComposite reports whether NFC made of in a character the Rust
// core's tables do not compose (one added to Unicode since them): it then
// leaves the segment as it is.
func unknownComposite(seg []byte, in string) bool {
	for len(seg) > 0 {
		r, size := utf8.DecodeRune(seg)
		seg = seg[size:]
		if _, ok := rustNFD[r]; ok && !strings.ContainsRune(in, r) {
			return true
		}
	}
	return false
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

func (d decompose) keeps(text string) bool { return d.form.IsNormalString(text) }

// override is the Rust core's decomposition of r where it differs from
// Go's.
func (d decompose) override(r rune) (string, bool) {
	m := rustNFD
	if d.form == norm.NFKD {
		m = rustNFKD
	}
	o, ok := m[r]
	return o, ok
}
func (u unicodeNorm) keeps(text string) bool { return u.form.IsNormalString(text) }

// sequenceNorm applies normalizers in turn, each aligned through the last.
type sequenceNorm []normalizer

func (s sequenceNorm) normalize(text string, base int) normalized {
	n := unchanged(text)
	for _, step := range s {
		if k, ok := step.(keeper); ok && k.keeps(n.s) {
			continue // nothing to change (already in NFC, say)
		}
		var next normalized
		if un, ok := step.(unicodeNorm); ok && n.align != nil {
			prev := n.align
			next = un.compose(n.s, 0, func(p int) bool { return p > 0 && prev[p] == prev[p-1] })
		} else {
			next = step.normalize(n.s, 0)
		}
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
