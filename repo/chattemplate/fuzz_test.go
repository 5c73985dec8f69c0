package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRender compiles and renders arbitrary templates over arbitrary
// messages: any outcome but a panic, a crash or an error outside the
// package's sentinels is a failure. Hostile templates included: the
// instrumentation (instrument.go, rewrite.go) must bound them.
func FuzzRender(f *testing.F) {
	msgs := []string{
		`[{"role":"system","content":"日本語 😀 \"q\""},{"role":"user","content":"hi\n"}]`,
		`[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"x\":1}"}}]}]`,
		`[{"role":"user","content":null}]`,
		`{"role":"user"}`,
		`[`,
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	for i, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) < 5000 {
			f.Add(string(b), msgs[i%len(msgs)])
		}
	}
	for _, src := range []string{`{{ messages[0].content | tojson(indent=2) }}`, `{% for m in messages %}{{ m.role | upper }}{% break %}{% endfor %}`,
		`{{ raise_exception('x') }}`, `{% if messages[0]['role'] == 'user' %}{{ range(3) | list }}{% endif %}`, `{{ strftime_now('%d %b') }}`,
		`{% macro f(n) %}{{ f(n ~ n) }}{% endmacro %}{{ f('ab') }}`, `{% set l = [1] %}{{ l.append(l) }}{{ l | string }}`,
		`{{ 'ab' * (1000 * 1000) | length }}{{ 'x' | indent(99) }}{{ 'a'.replace('', 'bb') }}`} {
		for _, m := range msgs {
			f.Add(src, m)
		}
	}
	f.Fuzz(func(t *testing.T, src, messages string) {
		tpl, err := Parse(src, map[string]any{"bos_token": "<s>"}, Config{MaxOutput: 1 << 16, Timeout: 200 * time.Millisecond})
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Parse error %v does not wrap ErrConfig", err)
			}
			return
		}
		out, err := tpl.Render(context.Background(), Chat{Messages: json.RawMessage(messages), AddGenerationPrompt: true})
		switch {
		case err == nil && len(out) > 1<<16:
			t.Fatalf("output of %d bytes passed the 64 KiB limit", len(out))
		case err != nil && !errors.Is(err, ErrInput) && !errors.Is(err, ErrRender) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrRunaway):
			t.Fatalf("Render error %v wraps no sentinel", err)
		}
	})
}
