package chattemplate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRender renders real templates with the golden "tools" request:
// the cost a chat request pays before the model runs.
func BenchmarkRender(b *testing.B) {
	var spec goldenSpec
	readGoldenSpec(b, &spec)
	c := spec.Contexts["tools"]
	chat := Chat{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: true}
	for _, name := range []string{"Meta-Llama-3-8B-Instruct.jinja", "Qwen3-235B-A22B.jinja", "gpt-oss-20b-Q8_0.jinja"} {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", name))
		if err != nil {
			b.Fatal(err)
		}
		tpl, err := Parse(string(src), map[string]any{"bos_token": "<s>", "eos_token": "</s>"}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tpl.Render(context.Background(), chat); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
