package chattemplate

import (
	"strings"
)

// The engine computes `s * n`, `a ~ b`, `a + b` and its filters and
// string methods at once, inside calls no hook sees, and Go cannot recover
// from an allocation the machine cannot hold nor from a stack overflow
// (printing a list that holds itself). So expressions are rewritten:
// `*`, `~` and `+` become calls of hooks that measure their operands
// first, a filter's input passes through a hook that measures it, and the
// filters and methods whose result can be a product of two sizes
// (replace, indent, join, format) become hooks that check it. Operands are
// found as the engine's parser finds them (github.com/ardanlabs/jinja
// parse.go: parseConcat over parseAddSub over parseMulDiv over parsePower,
// a unary chain of postfix expressions with an optional `** operand`);
// comparisons, not, and, or, in, is and if-else stand between operands.
// Expressions without any of these are left exactly as written.
const (
	hookMul    = "inferd_mul"
	hookAdd    = "inferd_add"
	hookCat    = "inferd_cat"
	hookGuard  = "inferd_guard"
	hookPrefix = "inferd_"
)

// boundedFilters are the filters replaced by hooks of the same semantics
// that check their result's size first; boundedMethods the string and
// list methods, called as filters (`s|inferd_m_replace(a, b)` for
// `s.replace(a, b)`: a method call and a filter are both postfix, applied
// left to right).
var (
	boundedFilters = map[string]bool{"replace": true, "indent": true, "join": true}
	boundedMethods = map[string]bool{"replace": true, "format": true, "append": true, "insert": true, "update": true, "pop": true}
)

// xtok is an expression token with its source span.
type xtok struct {
	kind       byte // 'n' name, 'l' literal, 'o' operator, '(' '[' '{' ')' ']' '}', ',' ':' '.' '|'
	val        string
	start, end int
}

// stringEnd is the index of the quote that closes the string literal
// opening at s[i] (a backslash escapes the next byte), or len(s) or past it
// when none does.
func stringEnd(s string, i int) int {
	q := s[i]
	for i++; i < len(s) && s[i] != q; i++ {
		if s[i] == '\\' {
			i++
		}
	}
	return i
}

func lexExpr(s string) []xtok {
	var toks []xtok
	for i := 0; i < len(s); {
		c, start := s[i], i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'' || c == '"':
			i = min(stringEnd(s, i)+1, len(s))
			toks = append(toks, xtok{'l', s[start:i], start, i})
			continue
		case c >= '0' && c <= '9':
			// As the engine's tokenizeExpr: digits, a fraction, and an
			// exponent only after a fraction.
			i = digits(s, i)
			if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
				i = digits(s, i+1)
				if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
					i++
					if i < len(s) && (s[i] == '+' || s[i] == '-') {
						i++
					}
					i = digits(s, i)
				}
			}
			toks = append(toks, xtok{'l', s[start:i], start, i})
			continue
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
				i++
			}
			toks = append(toks, xtok{'n', s[start:i], start, i})
			continue
		}
		if i+1 < len(s) {
			if two := s[i : i+2]; two == "**" || two == "//" || two == "==" || two == "!=" || two == "<=" || two == ">=" {
				toks = append(toks, xtok{'o', two, i, i + 2})
				i += 2
				continue
			}
		}
		kind := byte('o')
		switch {
		case strings.IndexByte("()[]{},:.|", c) >= 0:
			kind = c
		case strings.IndexByte("~+-*/%<>=", c) < 0:
			// The engine skips any other character.
			i++
			continue
		}
		toks = append(toks, xtok{kind, s[i : i+1], i, i + 1})
		i++
	}
	return toks
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// keywordOps are the names that stand between operands.
var keywordOps = map[string]bool{"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true}

// rewriteExpr returns expression (or statement) text s with the hooks
// placed (see above).
func rewriteExpr(s string) string {
	if !needsRewrite(s) {
		return s
	}
	r := rewriter{s: s, toks: lexExpr(s)}
	return r.seq(0, len(r.toks))
}

// needsRewrite: s may hold an operator, filter or method the rewrite
// bounds (a cheap test; the rewrite itself is exact).
func needsRewrite(s string) bool {
	if strings.ContainsAny(s, "*~+|") {
		return true
	}
	for m := range boundedMethods {
		if strings.Contains(s, "."+m) {
			return true
		}
	}
	return false
}

type rewriter struct {
	s    string
	toks []xtok
}

func (r *rewriter) is(i, end int, kind byte, vals ...string) bool {
	if i >= end || r.toks[i].kind != kind {
		return false
	}
	for _, v := range vals {
		if r.toks[i].val == v {
			return true
		}
	}
	return len(vals) == 0
}

// seq rewrites toks[i:end], a run of operands and the operators, keywords
// and separators between them, keeping the source's text between them.
func (r *rewriter) seq(i, end int) string {
	if i >= end {
		return ""
	}
	var b strings.Builder
	last := r.toks[i].start // source offset up to which b holds s
	for i < end {
		if !r.operandStart(i) {
			i++
			continue
		}
		b.WriteString(r.s[last:r.toks[i].start])
		text, next := r.concat(i, end)
		// `if''+x` must not become `ifinferd_add(...)`.
		if out := b.String(); out != "" && text != "" && isIdentByte(out[len(out)-1]) && isIdentByte(text[0]) {
			b.WriteByte(' ')
		}
		b.WriteString(text)
		last, i = r.toks[next-1].end, next
	}
	return b.String() + r.s[last:r.toks[end-1].end]
}

// operandStart: the token begins an operand (not an operator, keyword or
// separator).
func (r *rewriter) operandStart(i int) bool {
	t := r.toks[i]
	switch t.kind {
	case 'l', '(', '[', '{':
		return true
	case 'n':
		return !keywordOps[t.val]
	case 'o':
		// a sign where an operand is expected
		if t.val != "-" && t.val != "+" {
			return false
		}
		if i == 0 {
			return true
		}
		p := r.toks[i-1]
		return p.kind == 'o' || p.kind == '(' || p.kind == '[' || p.kind == '{' || p.kind == ',' || p.kind == ':' ||
			(p.kind == 'n' && keywordOps[p.val])
	}
	return false
}

// concat, addSub and mulDiv read the engine's binary levels; each returns
// its text, rewritten, and the index after it.
func (r *rewriter) concat(i, end int) (string, int) {
	acc, i := r.addSub(i, end)
	for r.is(i, end, 'o', "~") && i+1 < end {
		var right string
		right, i = r.addSub(i+1, end)
		acc = hookCat + "(" + acc + ", " + right + ")"
	}
	return acc, i
}

func (r *rewriter) addSub(i, end int) (string, int) {
	acc, i := r.mulDiv(i, end)
	for r.is(i, end, 'o', "+", "-") && i+1 < end {
		op := r.toks[i].val
		var right string
		right, i = r.mulDiv(i+1, end)
		if op == "+" {
			acc = hookAdd + "(" + acc + ", " + right + ")"
		} else {
			acc = "(" + acc + " - " + right + ")"
		}
	}
	return acc, i
}

func (r *rewriter) mulDiv(i, end int) (string, int) {
	acc, i := r.power(i, end)
	for r.is(i, end, 'o', "*", "/", "%", "//") && i+1 < end {
		op := r.toks[i].val
		var right string
		right, i = r.power(i+1, end)
		if op == "*" {
			acc = hookMul + "(" + acc + ", " + right + ")"
		} else {
			acc = "(" + acc + " " + op + " " + right + ")"
		}
	}
	return acc, i
}

func (r *rewriter) power(i, end int) (string, int) {
	var b strings.Builder
	i = r.unary(i, end, &b)
	if r.is(i, end, 'o', "**") {
		b.WriteString(" ** ")
		i = r.unary(i+1, end, &b)
	}
	return b.String(), i
}

// unary copies signs and the postfix expression they apply to.
func (r *rewriter) unary(i, end int, b *strings.Builder) int {
	for r.is(i, end, 'o', "-", "+") {
		b.WriteString(r.toks[i].val)
		i++
	}
	return r.postfix(i, end, b)
}

// postfix copies an atom and its .attr, [..], (..) and |filter(..)
// chain: each filter's input passes through hookGuard, bounded filters
// and methods become hooks.
func (r *rewriter) postfix(i, end int, b *strings.Builder) int {
	if i >= end {
		return i
	}
	i = r.atom(i, end, b)
	for i < end {
		switch t := r.toks[i]; {
		case t.kind == '|' && r.is(i+1, end, 'n'):
			name := r.toks[i+1].val
			if boundedFilters[name] {
				name = hookPrefix + name
			}
			b.WriteString("|" + hookGuard + "|" + name)
			i = r.call(i+2, end, b)
		case t.kind == '.' && r.is(i+1, end, 'n') && boundedMethods[r.toks[i+1].val] && r.is(i+2, end, '('):
			b.WriteString("|" + hookPrefix + "m_" + r.toks[i+1].val)
			i = r.atom(i+2, end, b)
		case t.kind == '.' || t.kind == '|':
			// Spaced, so `0 .01` (attribute 01 of 0) stays apart.
			b.WriteString(" " + t.val)
			if i+1 < end {
				b.WriteString(" " + r.toks[i+1].val)
			}
			i = min(i+2, end)
		case t.kind == '[' || t.kind == '(':
			i = r.atom(i, end, b)
		default:
			return i
		}
	}
	return i
}

// call copies a filter's argument list, when it has one.
func (r *rewriter) call(i, end int, b *strings.Builder) int {
	if r.is(i, end, '(') {
		return r.atom(i, end, b)
	}
	return i
}

// atom copies one name or literal, or a bracketed group with its inside
// rewritten.
func (r *rewriter) atom(i, end int, b *strings.Builder) int {
	t := r.toks[i]
	closer := map[byte]byte{'(': ')', '[': ']', '{': '}'}[t.kind]
	if closer == 0 {
		b.WriteString(t.val)
		return i + 1
	}
	depth, j := 0, i
	for ; j < end; j++ {
		switch r.toks[j].kind {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
		if depth == 0 {
			break
		}
	}
	b.WriteByte(t.kind)
	if j > i+1 {
		b.WriteString(r.seq(i+1, j))
	}
	if j < end {
		b.WriteByte(closer)
		return j + 1
	}
	return end
}
