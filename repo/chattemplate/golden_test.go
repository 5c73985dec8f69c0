package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// goldenNow is render.py's fixed clock.
var goldenNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type goldenSpec struct {
	Special  map[string]string `json:"special"`
	Contexts map[string]struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		Documents           json.RawMessage `json:"documents"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		Kwargs              json.RawMessage `json:"chat_template_kwargs"`
	} `json:"contexts"`
}

type goldenResult struct {
	OK  *string `json:"ok"`
	Err *string `json:"err"`
}

// knownGaps are the golden cases the engine does not yet render as
// Python's jinja2 does; each names why.
var knownGaps = map[string]string{}

func readGoldenSpec(t testing.TB, spec *goldenSpec) {
	t.Helper()
	b, err := os.ReadFile("testdata/contexts.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, spec); err != nil {
		t.Fatalf("contexts.json: %v", err)
	}
}

func readGolden(t *testing.T) (goldenSpec, map[string]goldenResult) {
	t.Helper()
	var spec goldenSpec
	var gold map[string]goldenResult
	readGoldenSpec(t, &spec)
	for path, v := range map[string]any{"testdata/golden.json": &gold} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return spec, gold
}

// TestGolden renders every template with every context and compares with
// Python jinja2 in transformers' environment (testdata/render.py).
func TestGolden(t *testing.T) {
	spec, gold := readGolden(t)
	special := map[string]any{}
	for k, v := range spec.Special {
		special[k] = v
	}
	keys := make([]string, 0, len(gold))
	for k := range gold {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) < 60 {
		t.Fatalf("golden.json has %d cases, want every template × context", len(keys))
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			if why, ok := knownGaps[key]; ok {
				t.Skip(why)
			}
			file, cname, _ := strings.Cut(key, ":")
			src, err := os.ReadFile(filepath.Join("testdata", "templates", file))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Parse(string(src), special, Config{Now: func() time.Time { return goldenNow }})
			if err != nil {
				t.Fatal(err)
			}
			c := spec.Contexts[cname]
			got, err := tpl.Render(context.Background(), Chat{Messages: c.Messages, Tools: c.Tools, Documents: c.Documents,
				AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
			want := gold[key]
			switch {
			case want.Err != nil && err == nil:
				t.Fatalf("rendered %q, want an error like Python's %q", got, *want.Err)
			case want.Err != nil && !errors.Is(err, ErrRender):
				t.Fatalf("error %v does not wrap ErrRender", err)
			case want.Err != nil:
				return
			case err != nil:
				t.Fatalf("Render: %v", err)
			case got != *want.OK:
				t.Fatalf("render differs from Python at byte %d:\n got %q\nwant %q", diffAt(got, *want.OK), got, *want.OK)
			}
		})
	}
}

func diffAt(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
