package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// byteChar maps each byte to the printable character GPT-2's byte-level
// BPE uses for it (huggingface/tokenizers pre_tokenizers/byte_level.rs
// bytes_char): printable Latin-1 bytes stand for themselves, the others
// for U+0100 onwards in byte order.
var byteChar = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// byteLevel is the ByteLevel pre-tokenizer: an optional leading space,
// GPT-2's split regex, then every byte written as its byteChar.
type byteLevel struct {
	addPrefixSpace, useRegex bool
}

// split calls fn with each word, as a normalized text of byte-level
// characters aligned to the original input.
func (p *byteLevel) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	if from >= to {
		return
	}
	src := n
	if p.addPrefixSpace && n.s[from] != ' ' {
		// pre_tokenizers/byte_level.rs prepends a space to each part that
		// added tokens left that does not start with one; as
		// NormalizedString::prepend, it aligns to the first character.
		pre := normalized{s: " " + n.s[from:to], align: make([]span, 0, to-from+1)}
		pre.align = append(append(pre.align, n.align[from]), n.align[from:to]...)
		src, from, to = &pre, 0, len(pre.s)
	}
	// One word is handed to fn at a time, and what fn keeps of it is the
	// string (tokens copy offsets out), so the buffers are reused.
	var buf []byte
	w := &normalized{}
	emit := func(a, b int) {
		buf, w.align = buf[:0], w.align[:0]
		for i := a; i < b; i++ {
			c := byteChar[src.s[i]]
			if c < utf8.RuneSelf {
				buf = append(buf, byte(c))
				w.align = append(w.align, src.align[i])
				continue
			}
			buf = utf8.AppendRune(buf, c)
			w.align = append(w.align, src.align[i], src.align[i])
		}
		w.s = string(buf)
		fn(w, 0, len(buf))
	}
	if !p.useRegex {
		emit(from, to)
		return
	}
	for i := from; i < to; {
		end := from + gpt2Next(src.s[from:to], i-from)
		emit(i, end)
		i = end
	}
}

// gpt2Next returns the end of the match at i of GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (alternatives tried in order, as a backtracking engine does).
func gpt2Next(s string, i int) int {
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		}
		if i+2 < len(s) {
			switch s[i+1 : i+3] {
			case "re", "ve", "ll":
				return i + 3
			}
		}
	}
	j := i
	if s[j] == ' ' && j+1 < len(s) {
		j++
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	switch {
	case unicode.IsLetter(r):
		return runWhile(s, j, unicode.IsLetter)
	case unicode.IsNumber(r):
		return runWhile(s, j, unicode.IsNumber)
	case !unicode.IsSpace(r):
		return runWhile(s, j, func(r rune) bool { return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	}
	// Whitespace: \s+(?!\S) leaves the last space of a run for the word
	// that follows; a lone space before a word is taken by \s+.
	end := runWhile(s, i, unicode.IsSpace)
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

func runWhile(s string, i int, ok func(rune) bool) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !ok(r) {
			break
		}
		i += size
	}
	return i
}
