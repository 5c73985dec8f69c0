package chattemplate

import (
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The engine computes `s * n` as strings.Repeat at once, and Go cannot
// recover from an allocation the machine cannot hold, so every `*` in a
// template becomes a call of hookMul, which measures first. The operands
// are found as the engine's parser finds them (github.com/ardanlabs/jinja
// parse.go: parseMulDiv's operands are parsePower's, a unary chain of
// postfix expressions with an optional `** operand`); expressions without
// `*` are left exactly as written.
const hookMul = "inferd_mul"

// xtok is an expression token with its source span.
type xtok struct {
	kind       byte // 'n' name, 'l' literal, 'o' operator, '(' '[' '{' ')' ']' '}', ',' ':' '.' '|'
	val        string
	start, end int
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
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i = min(i+1, len(s))
			toks = append(toks, xtok{'l', s[start:i], start, i})
			continue
		case c >= '0' && c <= '9':
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
				((s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E'))) {
				i++
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
		if strings.IndexByte("()[]{},:.|", c) >= 0 {
			kind = c
		}
		toks = append(toks, xtok{kind, s[i : i+1], i, i + 1})
		i++
	}
	return toks
}

// keywordOps are the names that stand between operands.
var keywordOps = map[string]bool{"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true}

// rewriteMul returns expression (or statement) text s with each chain of
// multiplicative operators that holds a `*` turned into hookMul calls.
func rewriteMul(s string) string {
	if !strings.Contains(s, "*") {
		return s
	}
	toks := lexExpr(s)
	r := mulRewriter{s: s, toks: toks}
	out, _ := r.seq(0, len(toks))
	return out
}

type mulRewriter struct {
	s    string
	toks []xtok
}

// seq rewrites toks[i:end], a run of operands and operators.
func (r *mulRewriter) seq(i, end int) (string, int) {
	var b strings.Builder
	last := 0 // source offset up to which b holds s
	if i < end {
		last = r.toks[i].start
	}
	for i < end {
		t := r.toks[i]
		if !r.operandStart(i, end) {
			i++
			continue
		}
		first, next := r.operand(i, end)
		chain, ops := []string{first}, []string{}
		for next < end && r.toks[next].kind == 'o' && (r.toks[next].val == "*" || r.toks[next].val == "/" || r.toks[next].val == "%" || r.toks[next].val == "//") {
			op := r.toks[next].val
			if next+1 >= end {
				break
			}
			operand, after := r.operand(next+1, end)
			chain, ops, next = append(chain, operand), append(ops, op), after
		}
		b.WriteString(r.s[last:t.start])
		b.WriteString(joinChain(chain, ops))
		if next > i {
			last = r.toks[next-1].end
		}
		i = next
	}
	if end > 0 {
		b.WriteString(r.s[last:r.toks[end-1].end])
	}
	return b.String(), end
}

// operandStart: the token begins an operand (not an operator, keyword or
// separator).
func (r *mulRewriter) operandStart(i, end int) bool {
	t := r.toks[i]
	switch t.kind {
	case 'l', '(', '[', '{':
		return true
	case 'n':
		return !keywordOps[t.val]
	case 'o':
		// unary minus or plus where an operand is expected
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

// operand reads a parsePower operand at toks[i:] and returns its text,
// rewritten inside, and the index after it.
func (r *mulRewriter) operand(i, end int) (string, int) {
	var b strings.Builder
	i = r.unary(i, end, &b)
	if i < end && r.toks[i].kind == 'o' && r.toks[i].val == "**" {
		b.WriteString(" ** ")
		i = r.unary(i+1, end, &b)
	}
	return b.String(), i
}

// unary copies signs and the postfix expression they apply to.
func (r *mulRewriter) unary(i, end int, b *strings.Builder) int {
	for i < end && r.toks[i].kind == 'o' && (r.toks[i].val == "-" || r.toks[i].val == "+") {
		b.WriteString(r.toks[i].val)
		i++
	}
	return r.postfix(i, end, b)
}

// postfix copies an atom and its .attr, [..], (..) and |filter(..) chain.
func (r *mulRewriter) postfix(i, end int, b *strings.Builder) int {
	if i >= end {
		return i
	}
	i = r.atom(i, end, b)
	for i < end {
		switch r.toks[i].kind {
		case '.', '|':
			b.WriteString(r.toks[i].val)
			if i+1 < end {
				b.WriteString(r.toks[i+1].val)
			}
			i = min(i+2, end)
			if i < end && r.toks[i].kind == '(' {
				i = r.atom(i, end, b)
			}
		case '[', '(':
			i = r.atom(i, end, b)
		default:
			return i
		}
	}
	return i
}

// atom copies one name or literal, or a bracketed group with its inside
// rewritten.
func (r *mulRewriter) atom(i, end int, b *strings.Builder) int {
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
		inner, _ := r.seq(i+1, j)
		b.WriteString(inner)
	}
	if j < end {
		b.WriteByte(closer)
		return j + 1
	}
	return end
}

// joinChain writes a left-associative chain with each `*` a hookMul call.
func joinChain(chain, ops []string) string {
	acc := chain[0]
	for k, op := range ops {
		if op == "*" {
			acc = hookMul + "(" + acc + ", " + chain[k+1] + ")"
		} else {
			acc = "(" + acc + " " + op + " " + chain[k+1] + ")"
		}
	}
	return acc
}

// mul is the engine's `*` (mulValues in github.com/ardanlabs/jinja
// eval.go) with the repeated string measured before it is made.
func (m *meter) mul(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), fmt.Errorf("%s takes two operands", hookMul)
	}
	a, b := args[0], args[1]
	if a.IsString() && b.IsInt() {
		n := b.AsInt()
		if n < 0 {
			return jinja.Undefined(), fmt.Errorf("negative repeat count %d", n)
		}
		if l := int64(len(a.AsString())); l > 0 && n > int64(m.bound)/l {
			return jinja.Undefined(), m.fail("a string of %d bytes repeated %d times is over %d bytes", l, n, m.bound)
		}
		return jinja.NewString(strings.Repeat(a.AsString(), int(n))), nil
	}
	if a.IsFloat() || b.IsFloat() {
		return jinja.NewFloat(engineFloat(a) * engineFloat(b)), nil
	}
	return jinja.NewInt(engineInt(a) * engineInt(b)), nil
}

// engineInt and engineFloat are the engine's toInt64 and toFloat64
// (github.com/ardanlabs/jinja builtins.go).
func engineInt(v jinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var n int64
		_, _ = fmt.Sscanf(v.AsString(), "%d", &n)
		return n
	}
	return 0
}

func engineFloat(v jinja.Value) float64 {
	switch {
	case v.IsFloat():
		return v.AsFloat()
	case v.IsInt():
		return float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var f float64
		_, _ = fmt.Sscanf(v.AsString(), "%f", &f)
		return f
	}
	return 0
}
