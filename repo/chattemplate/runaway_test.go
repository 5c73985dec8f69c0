package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// TestRunaway renders hostile templates with the default bounds but the
// time, a 1 MiB prompt (a 4 MiB bound on what a render builds) and a
// million steps: each must end with ErrRunaway naming its bound (or the engine's
// own refusal), never hang, overflow the stack or allocate without bound.
func TestRunaway(t *testing.T) {
	big := strings.Repeat("0123456789", 100)
	tests := []struct {
		name, src string
		wantErr   error
		errText   string
	}{
		{"macro recursion", `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`, ErrRunaway, "nested over 256"},
		{"mutual recursion", `{% macro a() %}x{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`, ErrRunaway, "nested over"},
		{"recursion doubling an argument", `{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}`, ErrRunaway, ""},
		{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, ErrRunaway, "loop iterations"},
		{"range(10**9)", `{% for i in range(1000000000) %}{% endfor %}`, ErrRender, "range too big"},
		{"string multiplication", `{{ 'a' * (1000000 * 1000000) }}`, ErrRunaway, "repeated"},
		{"multiplication in a set", `{% set x = 'ab' * (1000 * 1000 * 1000) %}{{ x | length }}`, ErrRunaway, "repeated"},
		{"multiplication in an if", `{% if ('ab' * 100000000000) | length %}y{% endif %}`, ErrRunaway, "repeated"},
		{"multiplication in a filter argument", `{{ messages | map(attribute='x' * 100000000000) | list }}`, ErrRunaway, "repeated"},
		{"doubling a string", `{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}`,
			ErrRunaway, "concatenation of over"},
		{"doubling a list", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | length }}`,
			ErrRunaway, "value over"},
		{"list.append, as the sandbox refuses it", `{% set l = [1] %}{{ l.append(l) }}{{ l }}`, ErrRender, "'append' of 'list' object is unsafe"},
		{"list.insert", `{% set l = [1] %}{{ l.insert(0, l) }}`, ErrRender, "'insert' of 'list' object is unsafe"},
		{"list.pop", `{{ messages.pop() }}`, ErrRender, "'pop' of 'list' object is unsafe"},
		{"dict.update", `{% set d = {'a': 1} %}{{ d.update({'d': d}) }}`, ErrRender, "'update' of 'dict' object is unsafe"},
		{"assigning to request data", `{% set m = messages[0] %}{% set m.role = 'x' %}{{ m.role }}`, ErrRender, "non-namespace object"},
		{"assigning to a dict", `{% set d = {'a': 1} %}{% set d.a = 2 %}{{ d.a }}`, ErrRender, "non-namespace object"},
		{"a namespace inside a list, then grown", `{% set ns = namespace(s='x') %}{% set l = [ns, ns, ns, ns] %}{{ l | length }}` +
			`{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ l | string }}`, ErrRunaway, "over"},
		{"a namespace that holds itself", `{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns | string }}`, ErrRunaway, "hold itself"},
		{"doubling with +", `{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, ErrRunaway, "concatenation of over"},
		{"doubling a list with +", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`, ErrRunaway, "list of over"},
		{"one long concatenation", `{% set s = 'x' * 2000000 %}{{ (s ~ s ~ s) | length }}`, ErrRunaway, "concatenation of over"},
		{"replace filter product", `{% set s = 'x' * 10000 %}{{ s | replace('x', s) | length }}`, ErrRunaway, "replace of over"},
		{"replace method product", `{% set s = 'x' * 10000 %}{{ s.replace('', s) | length }}`, ErrRunaway, "replace of over"},
		{"format product", `{% set s = 'x' * 10000 %}{{ (('{0}' * 10000).format(s)) | length }}`, ErrRunaway, "replace of over"},
		{"indent width", `{{ 'a\nb' | indent(1000000000000) }}`, ErrRunaway, "indent of over"},
		{"join of a shared string", `{% set s = 'x' * 300000 %}{{ ([s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s] | join) | length }}`,
			ErrRunaway, "value over"},
		{"literal text in loops", `{% for i in range(100000) %}{% for j in range(9) %}` + big + `{% endfor %}{% endfor %}`, ErrRunaway, "produced over"},
		{"printing in loops", `{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}`, ErrRunaway, "produced over"},
		{"macro output in loops", `{% macro m() %}` + big + `{% endmacro %}{% for i in range(100000) %}{% for j in range(9) %}{{ m() }}{% endfor %}{% endfor %}`,
			ErrRunaway, "produced over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bounds, not the time, must end each render (under
			// -race too, where they take longer); the time bound has
			// tests of its own.
			_, err := render(t, tt.src, `[{"role":"user","content":"hi"}]`, Config{Timeout: time.Minute, MaxOutput: 1 << 20, MaxSteps: 1_000_000})
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("err = %v, want %v with %q", err, tt.wantErr, tt.errText)
			}
		})
	}
}

// TestRunawayStopsAbandonedRender: a render given up at its timeout ends at
// its next loop iteration and gives its slot back, instead of running on.
func TestRunawayStopsAbandonedRender(t *testing.T) {
	tpl, err := Parse(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, nil,
		Config{Timeout: 20 * time.Millisecond, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(context.Background(), Chat{Messages: json.RawMessage(`[]`)})
	if !errors.Is(err, ErrRunaway) || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "took over") {
		t.Fatalf("err = %v, want ErrRunaway and ErrLimit for the time", err)
	}
	deadline := time.Now().Add(time.Second)
	for len(tpl.slots) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned render still holds its slot after a second")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestInstrumentedRendersAsWritten compares instrumented templates with the
// engine's own rendering of the same source: hooks must not change a
// byte, whitespace control included (the golden tests do so for real
// templates).
func TestInstrumentedRendersAsWritten(t *testing.T) {
	srcs := []string{
		"{%- for m in messages -%}\n  <{{- m.role -}}>\n{%- endfor %}\nend",
		"{% for m in messages %}\n    {{ m.content }}\n{% endfor %}\n",
		"{% macro f(x, y='d') -%}\n  [{{ x }}|{{ y }}]\n{%- endmacro %}\n{{ f(1) }} {{ f(2, y='e') }}",
		"{% macro g(n) %}{% if n > 0 %}{{ n }},{{ g(n - 1) }}{% endif %}{% endmacro %}{{ g(5) }}",
		"{% set ns = namespace(a=[]) %}{% for i in range(4) %}{% set ns.a = ns.a + [i * 2] %}{% endfor %}{{ ns.a }}",
		"{% set a = 1 %}{{ a }}{% set c %}block {{ a * 2 }}{% endset %}{{ c }}",
		"{{ 2 * 3 + 4 }} {{ -2 * 3 }} {{ 2 ** 3 * 2 }} {{ 7 / 2 * 2 }} {{ 7 // 2 * 3 % 4 }} {{ [1, 2] | length * 3 }}",
		"{{ 'ab' * 2 ~ 'c' }} {{ 'x' * 0 }}|{{ 3 * 'x' }} {{ 2.5 * 2 }} {{ true * 3 }} {{ '4' * 2.0 }} {{ (1 + 2) * (3 - 1) }}",
		"{{ messages[0]['content'] * 2 }} {{ messages | map(attribute='role') | join('*') }} {{ '*' }}",
		"{% if 2 * 2 == 4 and not 1 * 0 %}yes{% else %}no{% endif %}{% for i in range(2 * 2) if i * 3 > 2 %}{{ i }}{% endfor %}",
		"{% raw %}{% for x in y %}{{ a * b }}{% endraw %}{# {{ 1 * 2 }} #}",
		"{{ 'a' ~ 1 ~ 2.5 ~ none ~ true ~ [1, 'b'] ~ {'k': 'v'} }} {{ 1 + 2 }} {{ 1.5 + 2 }} {{ 'a' + 1 }} {{ [1] + [2] }} {{ 3 - 1 - 1 }}",
		"{{ messages[0].content | upper ~ '!' }} {{ 'a,b' | replace(',', ';') }} {{ 'x\ny' | indent(2) }}|{{ 'x\ny' | indent(2, true) }}",
		"{{ [1, 2, 3] | join('-') }} {{ messages | join(',', attribute='role') }} {{ 'ab'.replace('a', 'c') }} {{ '{0}-{}-{1}'.format('p', 'q') }}",
		"{% set l = [1] %}{{ l.pop }}{{ l }} {% set d = {'a': 1} %}{{ d.update }}{{ d | tojson }} {{ messages[0].get('role') }}",
		"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }} {{ not 1 ~ 2 }} {{ 1 if 'a' ~ 'b' == 'ab' else 2 }}",
		"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list | length }} {{ (messages | last).role | default('x') }}",
		"{{ x | default('none') }} {{ -1 + -2 }} {{ 2 ** 2 + 1 }} {{ messages[-1:] | length }} {{ 'a' ~ ('b' if true else 'c') }}",
		"{% for x in [1] %}\n\n\nfoo\n\n{% endfor %}\n\n\nbar{% if true %}\n\n\nbaz{% else %}\n\nqux{% endif %}\n\nend",
		"{% macro m() %}\n\n  a\n\n  {% endmacro %}\n\n\n{{ m() }}\n{%- if true -%}\n\n x \n\n{%- endif -%}\n\n y",
		"{% for m in messages %}{% for k in [1, 2] %}{{ k }}{% if loop.last %};{% endif %}{% endfor %}{% else %}none{% endfor %}",
	}
	vars := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for _, src := range srcs {
		want := engineRender(t, src, vars)
		got, err := render(t, src, `[{"role":"user","content":"hi"}]`, Config{})
		if err != nil || got != want {
			t.Errorf("%q\ninstrumented: %q, %v\nthe engine:   %q\n(source as instrumented: %q)", src, got, err, want, instrument(src))
		}
	}
}

func engineRender(t *testing.T, src string, vars map[string]any) string {
	t.Helper()
	tpl, err := jinja.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzRewriteExpr: rewriting never panics, leaves text that needs no
// hook as it is, and turns `a * b` into a hook call (FuzzInstrumentSame
// checks that rewritten templates render as written).
func FuzzRewriteExpr(f *testing.F) {
	for _, s := range []string{"a * b", "-x.y[1](2) ** 2 * f(c * d) / 3", "'*' ~ \"*\"", "x | f(1 * 2, k=3 * 4)", "[1 *", "(*)", "a **", "",
		"a ~ b + c", "s.replace('a', 'b') | join(',')", "0 .01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := rewriteExpr(s)
		if !needsRewrite(s) && out != s {
			t.Fatalf("%q rewritten to %q", s, out)
		}
		toks := lexExpr(s)
		if len(toks) == 3 && toks[0].kind == 'n' && !keywordOps[toks[0].val] && toks[1].val == "*" && toks[2].kind == 'n' && !keywordOps[toks[2].val] {
			if want := hookMul + "(" + toks[0].val + ", " + toks[2].val + ")"; out != want {
				t.Fatalf("%q rewritten to %q, want %q", s, out, want)
			}
		}
	})
}

// FuzzInstrumentSame renders templates that cannot run away (short, and
// without macros, ranges, namespaces, repetition or mutation, so the
// engine alone is safe to run on them) both as written, by the engine,
// and instrumented: the outputs must be the same, and so must success or
// failure.
func FuzzInstrumentSame(f *testing.F) {
	for _, src := range []string{
		"{{ 'a' ~ 1 ~ [1, 'b'] ~ {'k': none} }} {{ 1 + 2.5 }} {{ 'a' + 1 }} {{ [1] + [2] }}",
		"{%- if messages[0].role == 'user' -%}\n  {{ messages[0].content | upper ~ '!' }}\n{%- endif %}",
		"{{ 'a,b' | replace(',', ';') }} {{ 'x\ny' | indent(2, true) }} {{ [1, 2] | join('-') }} {{ '{0}{}'.format('p') }}",
		"{{ not 1 ~ 2 }} {{ 1 if 'a' ~ 'b' == 'ab' else 2 }} {{ -1 + -2 - 3 }} {{ 2 ** 2 + 1 // 2 % 3 }} {{ messages[-1:] | length }}",
		"{{ (messages | last).content | default('x') | trim }} {{ x | default(1 + 1) }} {{ messages | map(attribute='role') | list }}",
		"{% for x in [1, 2] %}\n\n  {{ x }}\n{% else %}\n\nnone{% endfor %}\n\n{% if x %}\n\na{% elif true %}\n  b\n{%- else -%}\nc{% endif %}\n",
		"  {%- for m in messages -%}\n {% set y = m.role ~ '!' %}{{ y }}\n  {% endfor %}\n{# c #}\n\n{{- 'z' -}}\n",
	} {
		f.Add(src)
	}
	chat := Chat{Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`), AddGenerationPrompt: true}
	f.Fuzz(func(t *testing.T, src string) {
		// tojson is the package's own either way (renameTojson), not the
		// engine's.
		for _, unsafe := range []string{"macro", "range", "*", "indent", "append", "insert", "update", "pop", "call", "raise", "filter", "namespace", "tojson"} {
			if strings.Contains(src, unsafe) || len(src) > 300 {
				t.Skip()
			}
		}
		raw, err := jinja.Compile(src)
		tpl, perr := Parse(src, map[string]any{"bos_token": "<s>"}, Config{})
		if err != nil {
			if perr == nil {
				t.Fatalf("%q: the engine refuses it (%v), instrumented it compiles", src, err)
			}
			return
		}
		// The same variables for both (request JSON in its key order).
		vt := tpl
		if vt == nil {
			vt = &Template{special: map[string]jinja.Value{"bos_token": jinja.NewString("<s>")}, cfg: Config{Now: time.Now}}
		}
		vars, err := vt.vars(chat, newMeter(DefaultMaxOutput, DefaultMaxSteps))
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := func() (out string, err error) {
			defer func() {
				if r := recover(); r != nil {
					err = errors.New("panic")
				}
			}()
			return raw.RenderValues(vars)
		}()
		if perr != nil {
			// Refused once instrumented: only a template that fails
			// anyway may be (the engine accepts a few broken ones).
			if wantErr == nil {
				t.Fatalf("%q renders as %q, but instrumented it is refused: %v", src, want, perr)
			}
			return
		}
		got, gotErr := tpl.Render(context.Background(), chat)
		if (wantErr == nil) != (gotErr == nil) || got != want {
			t.Fatalf("%q\nthe engine:   %q, %v\ninstrumented: %q, %v\n(as instrumented: %q)", src, want, wantErr, got, gotErr, instrument(src))
		}
	})
}

// TestNestingRefused: templates whose parsing or evaluation would recurse
// without bound are refused at load; real nesting is not.
func TestNestingRefused(t *testing.T) {
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	tests := []struct {
		name, src string
		refused   bool
	}{
		{"brackets", "{{ " + deep("(", "1", ")", 100000) + " }}", true},
		{"signs", "{{ " + strings.Repeat("-", 100000) + "1 }}", true},
		{"nots", "{{ " + strings.Repeat("not ", 100000) + "1 }}", true},
		{"an and chain", "{{ 1" + strings.Repeat(" and 1", 100000) + " }}", true},
		{"a ~ chain", "{{ 'a'" + strings.Repeat(" ~ 'a'", 100000) + " }}", true},
		{"blocks", deep("{% if true %}", "x", "{% endif %}", 100000), true},
		{"real nesting", deep("{% if true %}", "{{ "+deep("[", "1", "]", 20)+" ~ 'a' ~ 'b' }}", "{% endif %}", 20), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src, nil, Config{})
			if refused := errors.Is(err, ErrConfig) && strings.Contains(err.Error(), "over"); refused != tt.refused {
				t.Fatalf("err = %v, want refused %v", err, tt.refused)
			}
		})
	}
}
