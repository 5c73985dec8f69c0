package tokenizer

import (
	"slices"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// unicodeForm is the NFC, NFD, NFKC and NFKD normalizers, run as the Rust
// core runs them (NormalizedString::nfc and the like, through the crate
// unicode-normalization-alignments, github.com/n1t0/unicode-normalization
// src/decompose.rs and src/recompose.rs): each character decomposed, the
// first character of a decomposition marked as replacing its source and
// the others as inserted; marks sorted by combining class; for NFC and
// NFKC, recomposed, a composite counting as its parts' changes less one;
// then aligned by transform. So a reordered mark or a composition that
// starts on an inserted character aligns as the Rust core's does.
type unicodeForm struct {
	form            norm.Form // for the already-normalized fast path
	compat, compose bool
}

func newUnicodeForm(form norm.Form) unicodeForm {
	return unicodeForm{form: form, compat: form == norm.NFKC || form == norm.NFKD, compose: form == norm.NFC || form == norm.NFKC}
}

func (u unicodeForm) keeps(text string) bool { return u.form.IsNormalString(text) }

func (u unicodeForm) normalize(text string, base int) normalized {
	if u.form.IsNormalString(text) {
		return unchanged(text)
	}
	cs := u.decompose(text)
	if u.compose {
		cs = recompose(cs)
	}
	n := identity(text, base)
	return transform(&n, cs, 0)
}

// ccc is a character's canonical combining class.
func ccc(r rune) uint8 {
	var b [utf8.UTFMax]byte
	return norm.NFD.Properties(b[:utf8.EncodeRune(b[:], r)]).CCC()
}

// decomposition is r's full decomposition as the Rust core's tables give
// it (rust_unicode.go lists where they differ from Go's), or nil.
func (u unicodeForm) decomposition(r rune, buf []byte) []byte {
	form, over := norm.NFD, rustNFD
	if u.compat {
		form, over = norm.NFKD, rustNFKD
	}
	if o, ok := over[r]; ok {
		return append(buf[:0], o...)
	}
	var e [utf8.UTFMax]byte
	s := e[:utf8.EncodeRune(e[:], r)]
	if r >= 0xAC00 && r <= 0xD7A3 { // Hangul syllables decompose algorithmically
		return form.Append(buf[:0], s...)
	}
	return form.Properties(s).Decomposition()
}

// decompose is decompose.rs Decompositions: non-starters are buffered and
// stably sorted by combining class before each starter and at the end.
func (u unicodeForm) decompose(text string) []change {
	cs := make([]change, 0, len(text)+8)
	classes := make([]uint8, 0, len(text)+8)
	ready := 0
	sortPending := func() {
		idx := make([]int, len(cs)-ready)
		for i := range idx {
			idx[i] = ready + i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return int(classes[a]) - int(classes[b]) })
		pc, pk := slices.Clone(cs[ready:]), slices.Clone(classes[ready:])
		for i, k := range idx {
			cs[ready+i], classes[ready+i] = pc[k-ready], pk[k-ready]
		}
		ready = len(cs)
	}
	push := func(r rune, first bool) {
		c := ccc(r)
		if c == 0 {
			sortPending()
		}
		n := 1
		if first {
			n = 0
		}
		cs = append(cs, change{r, n})
		classes = append(classes, c)
	}
	var buf [utf8.UTFMax * 18]byte
	for _, r := range text {
		d := u.decomposition(r, buf[:0])
		if d == nil {
			push(r, true)
			continue
		}
		for first := true; len(d) > 0; first = false {
			c, size := utf8.DecodeRune(d)
			d = d[size:]
			push(c, first)
		}
	}
	sortPending()
	return cs
}

// compose returns the primary composite of a and b, if the Rust core's
// tables have it.
func compose(a, b rune) (rune, bool) {
	var e [2 * utf8.UTFMax]byte
	n := utf8.EncodeRune(e[:], a)
	if norm.NFC.Properties(e[n : n+utf8.EncodeRune(e[n:], b)]).BoundaryBefore() {
		return 0, false // b never combines with what precedes it
	}
	m := n + utf8.EncodeRune(e[n:], b)
	var out [2 * utf8.UTFMax]byte
	c := norm.NFC.Append(out[:0], e[:m]...)
	r, size := utf8.DecodeRune(c)
	if size != len(c) || r == a {
		return 0, false
	}
	if _, unknown := rustNFD[r]; unknown {
		return 0, false // a composite newer than the Rust core's tables
	}
	return r, true
}

// recompose is recompose.rs Recompositions over decomposed changes.
func recompose(cs []change) []change {
	out := cs[:0:0]
	out = slices.Grow(out, len(cs))
	var pending []change // marks held back while the composee may still compose
	var composee change
	has, lastCCC := false, -1
	for _, c := range cs {
		cls := int(ccc(c.r))
		switch {
		case !has:
			if cls != 0 {
				out = append(out, c)
				continue
			}
			composee, has = c, true
		case lastCCC < 0:
			if r, ok := compose(composee.r, c.r); ok {
				composee = change{r, composee.n + c.n - 1}
			} else if cls == 0 {
				out = append(out, composee)
				composee = c
			} else {
				pending = append(pending, c)
				lastCCC = cls
			}
		case lastCCC >= cls:
			if cls == 0 {
				out = append(append(out, composee), pending...)
				pending, composee, lastCCC = pending[:0], c, -1
			} else {
				pending = append(pending, c)
				lastCCC = cls
			}
		default:
			if r, ok := compose(composee.r, c.r); ok {
				composee = change{r, composee.n + c.n - 1}
			} else {
				pending = append(pending, c)
				lastCCC = cls
			}
		}
	}
	if has {
		out = append(out, composee)
	}
	return append(out, pending...)
}
