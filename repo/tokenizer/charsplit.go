package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// charSplit is a pre-tokenizer that splits on a class of characters with a
// Split behavior: WhitespaceSplit (whitespace, removed), Digits (numeric
// characters, each isolated or runs kept together) and Punctuation
// (pre_tokenizers/whitespace.rs, digits.rs, punctuation.rs).
type charSplit struct {
	is       func(rune) bool
	behavior string
}

func (c charSplit) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	var parts []part
	for i := from; i < to; {
		r, size := utf8.DecodeRuneInString(n.s[i:to])
		parts = append(parts, part{i - from, i - from + size, c.is(r)})
		i += size
	}
	// Adjacent non-matching characters form one part, as in the Rust core.
	var joined []part
	for _, p := range parts {
		if k := len(joined) - 1; k >= 0 && !p.match && !joined[k].match {
			joined[k].end = p.end
			continue
		}
		joined = append(joined, p)
	}
	sp := splitPre{behavior: c.behavior}
	for _, p := range sp.merge(joined) {
		if p.end > p.start && !(c.behavior == "Removed" && p.match) {
			fn(n, from+p.start, from+p.end)
		}
	}
}

func parseCharSplit(ty string, raw json.RawMessage) (preTokenizer, error) {
	var cj struct {
		IndividualDigits bool   `json:"individual_digits"`
		Behavior         string `json:"behavior"`
	}
	if err := json.Unmarshal(raw, &cj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing %s pre_tokenizer: %w", ty, err)
	}
	switch ty {
	case "WhitespaceSplit":
		return charSplit{is: unicode.IsSpace, behavior: "Removed"}, nil
	case "Digits":
		b := "Contiguous"
		if cj.IndividualDigits {
			b = "Isolated"
		}
		// digits.rs splits on char::is_numeric: any Nd, Nl or No
		// character ("４", "①"), not only ASCII digits.
		return charSplit{is: unicode.IsNumber, behavior: b}, nil
	}
	b := cj.Behavior
	if b == "" {
		b = "Isolated"
	}
	switch b {
	case "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous":
	default:
		return nil, fmt.Errorf("%w: Punctuation behavior %q", ErrUnsupported, b)
	}
	return charSplit{is: isBertPunct, behavior: b}, nil
}

// isOnigWord is Oniguruma's Unicode \w, which the Whitespace
// pre-tokenizer's pattern \w+|[^\w\s]+ uses (UTS #18 word characters):
// Alphabetic, marks, decimal digits, connector punctuation and
// Join_Control (ZWJ and ZWNJ; the goldens show each).
func isOnigWord(r rune) bool {
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

// whitespacePre is the Whitespace pre-tokenizer: runs of word characters
// and runs of other non-space characters, whitespace dropped.
type whitespacePre struct{}

func (whitespacePre) split(n *normalized, from, to int, fn func(w *normalized, from, to int)) {
	start, word := -1, false
	for i := from; i < to; {
		r, size := utf8.DecodeRuneInString(n.s[i:to])
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				fn(n, start, i)
				start = -1
			}
		case start >= 0 && isOnigWord(r) == word:
		default:
			if start >= 0 {
				fn(n, start, i)
			}
			start, word = i, isOnigWord(r)
		}
		i += size
	}
	if start >= 0 {
		fn(n, start, to)
	}
}
