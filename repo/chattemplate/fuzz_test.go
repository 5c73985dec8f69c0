package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRender compiles and renders arbitrary templates over arbitrary
// messages: any outcome but a panic or an error outside the package's
// sentinels is a failure. Templates that mutate lists or dicts in place
// or call replace or indent are skipped: a list can then hold itself and
// be printed by `~`, or one call can multiply two bounded sizes, inside
// the engine where no hook sees it (instrument.go bounds the rest).
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
		`{{ raise_exception('x') }}`, `{% if messages[0]['role'] == 'user' %}{{ range(3) | list }}{% endif %}`, `{{ strftime_now('%d %b') }}`} {
		for _, m := range msgs {
			f.Add(src, m)
		}
	}
	f.Fuzz(func(t *testing.T, src, messages string) {
		for _, unbounded := range []string{"append", "insert", "update", "replace", "indent"} {
			if strings.Contains(src, unbounded) {
				t.Skip()
			}
		}
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
