package chattemplate

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The Jinja engine takes no context and has no step, depth or size limit,
// and Go cannot recover from a stack overflow or an allocation the machine
// cannot hold. So a template's source is instrumented before it is
// compiled, with calls to per-render hooks (meter.go) that end the render
// with ErrRunaway:
//   - every loop iteration and macro call counts a step and sees the
//     render's deadline and cancellation, so a loop stops when the render
//     is abandoned instead of running on in its slot;
//   - macro calls nest at most maxMacroDepth deep (recursion through
//     macros);
//   - `{{ x }}` passes x through a hook that counts what it prints, and
//     each loop iteration or macro call counts its literal text, so the
//     text a render produces, in macros and captured blocks included, is
//     bounded before it is written;
//   - `{% set x = v %}` and a macro's arguments are measured (their
//     printed size, a walk that stops at the bound), so values cannot
//     double their way past the bound through variables or recursion, and
//     `set ns.attr = v` refuses a v that holds ns;
//   - operators, filters and methods are rewritten inside expressions
//     (rewrite.go, ops.go).
//
// A template that nests too deep to parse or evaluate safely is refused
// before any of this (checkNesting).
const (
	hookStep  = "inferd_step"
	hookEnter = "inferd_enter"
	hookLeave = "inferd_leave"
	hookOut   = "inferd_out"
	hookText  = "inferd_text"
	hookVal   = "inferd_val"
)

// seg is one piece of template source as the engine's scanner splits it
// (github.com/ardanlabs/jinja scan.go): text, or a {{ }}, {% %} or {# #}
// tag whose inner text (trim markers excluded) is src[in:inEnd].
type seg struct {
	kind          byte // 't' text, '{' expression, '%' statement, '#' comment
	start, end    int
	in, inEnd     int
	trimL, trimR  bool
	word, content string // statements: the keyword and the rest
}

// scanSegs splits src as the engine does: quotes inside {{ }} and {% %}
// hide closing delimiters; an unclosed tag runs to the end (the engine
// then refuses the template).
func scanSegs(src string) []seg {
	var segs []seg
	text := 0
	for i := 0; i+1 < len(src); {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		if i > text {
			segs = append(segs, seg{kind: 't', start: text, end: i})
		}
		s := seg{kind: src[i+1], start: i}
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[s.kind]
		j := i + 2
		if j < len(src) && src[j] == '-' {
			s.trimL = true
			j++
		}
		s.in = j
		s.inEnd, s.end = len(src), len(src)
		for j < len(src) {
			if s.kind != '#' && (src[j] == '\'' || src[j] == '"') {
				q := src[j]
				for j++; j < len(src) && src[j] != q; j++ {
					if src[j] == '\\' {
						j++
					}
				}
				j++
				continue
			}
			if src[j] == '-' && strings.HasPrefix(src[j+1:], closer) {
				s.trimR, s.inEnd, s.end = true, j, j+3
				break
			}
			if strings.HasPrefix(src[j:], closer) {
				s.inEnd, s.end = j, j+2
				break
			}
			j++
		}
		if s.kind == '%' {
			// The keyword is the leading letters, as the engine's
			// stmtKeyword reads it (`for00 in x` is a for).
			body := strings.TrimSpace(src[s.in:min(s.inEnd, len(src))])
			end := strings.IndexFunc(body, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
			if end < 0 {
				end = len(body)
			}
			s.word, s.content = body[:end], strings.TrimSpace(body[end:])
		}
		segs = append(segs, s)
		i, text = s.end, s.end
	}
	if text < len(src) {
		segs = append(segs, seg{kind: 't', start: text, end: len(src)})
	}
	return segs
}

// frame is an open loop or macro body, or a branch of an if: where its
// hook goes and the literal text it holds outside nested frames.
type frame struct {
	kind string // "for", "macro" or "if"
	slot int    // index in the output pieces of the hook's placeholder
	text int
	args string // a macro's parameter names, for inferd_enter
}

// instrument returns src with the hooks placed (see above). Hooks are
// expression tags that print nothing: the engine's trimming (trim markers,
// trim_blocks, lstrip_blocks) reaches past tags to the nearest text
// (applyTrimming in github.com/ardanlabs/jinja parse.go) and applies its
// defaults only for block tags and comments, so the text around a hook is
// trimmed as before.
func instrument(src string) string {
	var out []string
	var open []frame
	// begin opens a frame whose hook follows the tag just written.
	begin := func(kind string, args string) {
		out = append(out, "")
		open = append(open, frame{kind: kind, slot: len(out) - 1, args: args})
	}
	// end closes the innermost frame, placing its hook.
	end := func() frame {
		f := open[len(open)-1]
		open = open[:len(open)-1]
		n := strconv.Itoa(f.text)
		call := map[string]string{"for": hookStep + "(" + n + ")", "macro": hookEnter + "(" + n + f.args + ")", "if": hookText + "(" + n + ")"}[f.kind]
		out[f.slot] = "{{ " + call + " }}"
		return f
	}
	top := func(kind string) bool { return len(open) > 0 && open[len(open)-1].kind == kind }
	raw := false
	for _, s := range scanSegs(src) {
		piece := src[s.start:s.end]
		if raw {
			out = append(out, piece)
			raw = !(s.kind == '%' && s.word == "endraw")
			continue
		}
		switch {
		case s.kind == 't':
			if len(open) > 0 {
				open[len(open)-1].text += s.end - s.start
			}
			out = append(out, piece)
		case s.kind == '{' && strings.TrimSpace(src[s.in:s.inEnd]) == "":
			out = append(out, piece)
		case s.kind == '{':
			out = append(out, "{{"+dash(s.trimL)+" "+hookOut+"("+rewriteExpr(src[s.in:s.inEnd])+") "+dash(s.trimR)+"}}")
		case s.kind != '%':
			out = append(out, piece)
		case s.word == "raw":
			raw = true
			out = append(out, piece)
		case s.word == "set":
			out = append(out, wrapSet(src, s))
		case s.word == "for" || s.word == "macro" || s.word == "if":
			out = append(out, stmt(s, rewriteExpr(s.content)))
			args := ""
			if s.word == "macro" {
				args = macroParams(s.content)
			}
			begin(s.word, args)
		case (s.word == "elif" || s.word == "else") && top("if"):
			end()
			out = append(out, stmt(s, rewriteExpr(s.content)))
			begin("if", "")
		case s.word == "endif" && top("if"), s.word == "endfor" && top("for"):
			end()
			out = append(out, piece)
		case s.word == "endmacro" && top("macro"):
			end()
			out = append(out, "{{ "+hookLeave+"() }}", piece)
		case s.word == "call" || s.word == "filter":
			out = append(out, stmt(s, rewriteExpr(s.content)))
		default:
			// Other statements hold no expression (the engine skips
			// or refuses the ones it does not know).
			out = append(out, piece)
		}
	}
	return strings.Join(out, "")
}

// stmt writes a statement tag with its content.
func stmt(s seg, content string) string {
	if content == "" {
		return "{%" + dash(s.trimL) + " " + s.word + " " + dash(s.trimR) + "%}"
	}
	return "{%" + dash(s.trimL) + " " + s.word + " " + content + " " + dash(s.trimR) + "%}"
}

func dash(on bool) string {
	if on {
		return "-"
	}
	return ""
}

// wrapSet passes a `{% set target = value %}`'s value through hookVal;
// a block set and a tuple target are left as they are.
func wrapSet(src string, s seg) string {
	piece := src[s.start:s.end]
	eq := assignment(s.content)
	if eq < 0 || strings.Contains(s.content[:eq], ",") {
		if strings.Contains(s.content, "*") {
			return "{%" + dash(s.trimL) + " set " + rewriteExpr(s.content) + " " + dash(s.trimR) + "%}"
		}
		return piece
	}
	target, value := strings.TrimSpace(s.content[:eq]), strings.TrimSpace(s.content[eq+1:])
	if value == "" {
		return piece
	}
	args := rewriteExpr(value)
	// `set ns.attr = v`: v must not hold ns.
	if obj, _, ok := strings.Cut(target, "."); ok && isIdent(obj) {
		args += ", " + obj
	}
	return "{%" + dash(s.trimL) + " set " + target + " = " + hookVal + "(" + args + ") " + dash(s.trimR) + "%}"
}

// assignment is the index of a set statement's `=`: the first one that is
// not part of ==, !=, <= or >=, outside quotes; -1 when none.
func assignment(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			i = stringEnd(s, i)
		case c == '=':
			if i+1 < len(s) && s[i+1] == '=' {
				i++
				continue
			}
			if i > 0 && strings.IndexByte("!<>=", s[i-1]) >= 0 {
				continue
			}
			return i
		}
	}
	return -1
}

// macroParams returns ", a, b" for `name(a, b=1)`: the parameter names,
// each measured on entry.
func macroParams(sig string) string {
	open, end := strings.IndexByte(sig, '('), strings.LastIndexByte(sig, ')')
	if open < 0 || end < open {
		return ""
	}
	var names strings.Builder
	depth, start := 0, open+1
	flush := func(part string) {
		name, _, _ := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if isIdent(name) {
			names.WriteString(", " + name)
		}
	}
	for i := open + 1; i < end; i++ {
		c := sig[i]
		switch {
		case c == '\'' || c == '"':
			i = stringEnd(sig, i)
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			flush(sig[start:i])
			start = i + 1
		}
	}
	flush(sig[start:end])
	return names.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// maxNesting bounds how deep a template nests blocks, brackets and signs:
// the engine parses and evaluates them by recursion, and a Go stack that
// overflows ends the process. Real templates nest a few levels.
const maxNesting = 256

// checkNesting refuses a template (as written, or as instrumented, whose
// chains of hook calls nest once per operator) that nests over limit.
func checkNesting(src string, limit int) error {
	blocks := 0
	for _, s := range scanSegs(src) {
		if s.kind != '{' && s.kind != '%' {
			continue
		}
		switch {
		case s.kind == '%' && strings.HasPrefix(s.word, "end"):
			blocks--
		case s.kind == '%' && (s.word == "if" || s.word == "for" || s.word == "macro" || s.word == "call" || s.word == "filter" ||
			s.word == "raw" || s.word == "generation" || (s.word == "set" && assignment(s.content) < 0)):
			if blocks++; blocks > limit {
				return fmt.Errorf("blocks nested over %d deep", limit)
			}
		}
		// A chain of binary operators is a left-deep tree the engine
		// evaluates by recursion, one level an operator.
		depth, signs, ops := 0, 0, 0
		for _, t := range lexExpr(src[s.in:s.inEnd]) {
			if t.kind == 'o' || (t.kind == 'n' && keywordOps[t.val]) {
				if ops++; ops > 4*limit {
					return fmt.Errorf("an expression of over %d operators", 4*limit)
				}
			}
			switch {
			case t.kind == '(' || t.kind == '[' || t.kind == '{':
				depth++
			case t.kind == ')' || t.kind == ']' || t.kind == '}':
				depth--
			}
			if (t.kind == 'o' && (t.val == "-" || t.val == "+")) || (t.kind == 'n' && t.val == "not") {
				signs++
			} else if t.kind != '(' {
				signs = 0
			}
			if depth+signs > limit {
				return fmt.Errorf("an expression nested over %d deep", limit)
			}
		}
	}
	return nil
}
