package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// change is one output character of NormalizedString::transform
// (tokenizer/normalizer.rs): n = 0 replaces the next input character,
// n = 1 inserts, n < 0 replaces the next and removes -n after it.
type change struct {
	r rune
	n int
}

// transform applies changes to the whole of n after dropping its first
// initial characters, aligning each output character as transform_range
// does: a replacement to the character it replaces, an insertion to the
// input byte before it.
func transform(n *normalized, cs []change, initial int) normalized {
	off := 0
	skip := func() {
		if off < len(n.s) {
			_, size := utf8.DecodeRuneInString(n.s[off:])
			off += size
		}
	}
	for k := 0; k < initial; k++ {
		skip()
	}
	b := builder{out: make([]byte, 0, len(n.s)+8), align: make([]span, 0, len(n.s)+8)}
	for _, c := range cs {
		var sp span
		switch {
		case c.n > 0 && off < 1:
			sp = emptyStart(n)
		case c.n > 0:
			sp = n.align[min(off, len(n.align))-1]
		case off < len(n.align):
			sp = n.align[off]
		case len(n.align) > 0:
			sp = n.align[len(n.align)-1]
		}
		if c.n <= 0 {
			skip()
			for k := 0; k < -c.n; k++ {
				skip()
			}
		}
		b.add(c.r, sp)
	}
	return normalized{s: string(b.out), align: b.align}
}

// emptyStart is the alignment the Rust core gives an insertion at the very
// start, (0, 0): the start of the text.
func emptyStart(n *normalized) span {
	if len(n.align) == 0 {
		return span{}
	}
	return span{n.align[0].start, n.align[0].start}
}

// replaceNorm is the Replace normalizer (normalizers/replace.rs): every
// match of a literal or a regex becomes content; the new characters align
// to the matched text's last character.
type replaceNorm struct {
	lit     string         // literal pattern, or "" when a regex is set
	std     *regexp.Regexp // a plain regex
	re      *regexp2.Regexp
	content string
}

func parseReplace(kind string, raw json.RawMessage) (*replaceNorm, error) {
	var rj struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &rj); err != nil {
		return nil, fmt.Errorf("tokenizer: parsing Replace %s: %w", kind, err)
	}
	r := &replaceNorm{content: rj.Content}
	var expr string
	switch {
	case rj.Pattern.String != nil && *rj.Pattern.String != "":
		r.lit = *rj.Pattern.String
		return r, nil
	case rj.Pattern.String != nil:
		expr = regexp.QuoteMeta(*rj.Pattern.String)
	case rj.Pattern.Regex != nil:
		expr = *rj.Pattern.Regex
	default:
		return nil, fmt.Errorf("tokenizer: Replace %s has no pattern", kind)
	}
	if plainRegex(expr) {
		// No escapes, classes or groups' extensions: Go's regexp means the
		// same as Oniguruma here, and is much faster than regexp2.
		if re, err := regexp.Compile(expr); err == nil {
			r.std = re
			return r, nil
		}
	}
	re, err := regexp2.Compile(expr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: Replace %s pattern %q: %w", kind, expr, err)
	}
	r.re = re
	return r, nil
}

// plainRegex reports whether expr uses only literal characters,
// repetition, alternation, plain groups and bracketed ranges (" {2,}").
func plainRegex(expr string) bool {
	return !strings.ContainsAny(expr, "\\.$^") && !strings.Contains(expr, "(?") && !strings.Contains(expr, "[:")
}

// matches returns the byte ranges of the pattern's non-overlapping
// matches in s, leftmost first.
func (r *replaceNorm) matches(s string) [][]int {
	if r.std != nil {
		return r.std.FindAllStringIndex(s, -1)
	}
	if r.re != nil {
		// An error is a match timeout, and none is set.
		idx, _ := r.re.FindAllStringIndex(s, -1)
		return idx
	}
	var out [][]int
	for i := 0; ; {
		k := strings.Index(s[i:], r.lit)
		if k < 0 {
			return out
		}
		out = append(out, []int{i + k, i + k + len(r.lit)})
		i += k + len(r.lit)
	}
}

func (r *replaceNorm) normalize(text string, base int) normalized {
	m := r.matches(text)
	if len(m) == 0 {
		return unchanged(text)
	}
	n := identity(text, base)
	b := builder{out: make([]byte, 0, len(text)+8), align: make([]span, 0, len(text)+8)}
	last := 0
	for _, mt := range m {
		b.out = append(b.out, text[last:mt[0]]...)
		b.align = append(b.align, n.align[last:mt[0]]...)
		sp := emptyStart(&n)
		if mt[1] > 0 {
			sp = n.align[mt[1]-1]
		}
		for _, c := range r.content {
			b.add(c, sp)
		}
		last = mt[1]
	}
	b.out = append(b.out, text[last:]...)
	b.align = append(b.align, n.align[last:]...)
	return normalized{s: string(b.out), align: b.align}
}

// replaceTokens is Replace as a decoder: the same substitution in each
// token.
func (r *replaceNorm) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		m := r.matches(t)
		if len(m) == 0 {
			continue
		}
		var sb strings.Builder
		last := 0
		for _, mt := range m {
			sb.WriteString(t[last:mt[0]])
			sb.WriteString(r.content)
			last = mt[1]
		}
		sb.WriteString(t[last:])
		tokens[i] = sb.String()
	}
	return tokens
}

// stripNorm is the Strip normalizer: leading and/or trailing whitespace
// (Rust's char::is_whitespace) removed.
type stripNorm struct{ left, right bool }

func (s stripNorm) normalize(text string, base int) normalized {
	from, to := 0, len(text)
	if s.left {
		from = len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
	}
	if s.right {
		to = from + len(strings.TrimRightFunc(text[from:], unicode.IsSpace))
	}
	if from == 0 && to == len(text) {
		return unchanged(text)
	}
	n := identity(text, base)
	return normalized{s: text[from:to], align: n.align[from:to]}
}

// prependNorm is the Prepend normalizer: its string goes in front of a
// non-empty text, aligned to the first character (normalizer.rs prepend).
type prependNorm struct{ s string }

func (p prependNorm) normalize(text string, base int) normalized {
	if text == "" {
		return unchanged(text)
	}
	n := identity(text, base)
	b := builder{out: make([]byte, 0, len(text)+len(p.s)), align: make([]span, 0, len(text)+len(p.s))}
	for _, c := range p.s {
		b.add(c, n.align[0])
	}
	b.out = append(b.out, text...)
	b.align = append(b.align, n.align...)
	return normalized{s: string(b.out), align: b.align}
}
