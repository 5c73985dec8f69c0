package tokenizer

import (
	"sort"
	"unicode"
)

// runeRanges is a sorted list of [lo, hi] code point ranges.
type runeRanges [][2]rune

func (rs runeRanges) has(r rune) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= r })
	return i < len(rs) && rs[i][0] <= r
}

// The Rust core classifies characters with crates whose Unicode tables are
// older than Go's (unicode_categories for punctuation, marks and controls;
// unicode-normalization-alignments for NFD and NFKD: huggingface/tokenizers
// tokenizers/Cargo.toml), so characters added or recategorized since are
// handled as it handles them: rust_unicode.go lists the differences,
// measured with its npm binding (testdata/rust_unicode.mjs).

// isRustPunct is unicode_categories' is_punctuation for r >= 0x80.
func isRustPunct(r rune) bool {
	return unicode.IsPunct(r) && !rustNotPunct.has(r) || rustExtraPunct.has(r)
}

// isRustMn is unicode_categories' is_mark_nonspacing.
func isRustMn(r rune) bool {
	return unicode.Is(unicode.Mn, r) && !rustNotMn.has(r) || rustExtraMn.has(r)
}

// isRustMark is unicode-normalization-alignments' is_combining_mark.
func isRustMark(r rune) bool {
	return unicode.Is(unicode.M, r) && !rustNotMark.has(r) || rustExtraMark.has(r)
}

// isRustOtherControl is bert.rs is_control's categories (Cc, Cf, Co) for
// r >= 0x80.
func isRustOtherControl(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) && !rustNotControl.has(r) || rustExtraControl.has(r)
}
