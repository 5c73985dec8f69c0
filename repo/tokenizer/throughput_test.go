package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkThroughput encodes a corpus with each tokenizer.json named in
// TOKENIZER_BENCH_FILES (comma-separated), one Encode per paragraph of
// TOKENIZER_BENCH_CORPUS, truncation off. testdata/throughput.sh runs it
// beside the Rust core (testdata/throughput.mjs) on the same inputs.
func BenchmarkThroughput(b *testing.B) {
	files, corpus := os.Getenv("TOKENIZER_BENCH_FILES"), os.Getenv("TOKENIZER_BENCH_CORPUS")
	if files == "" || corpus == "" {
		b.Skip("TOKENIZER_BENCH_FILES and TOKENIZER_BENCH_CORPUS not set (see testdata/throughput.sh)")
	}
	data, err := os.ReadFile(corpus)
	if err != nil {
		b.Fatal(err)
	}
	texts := paragraphs(string(data))
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	for _, f := range strings.Split(files, ",") {
		tok, err := Load(f)
		if err != nil {
			b.Fatal(err)
		}
		tok.trunc = nil
		b.Run(filepath.Base(f), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			tokens := 0
			for b.Loop() {
				tokens = 0
				for _, t := range texts {
					enc, err := tok.Encode(t, true)
					if err != nil {
						b.Fatal(err)
					}
					tokens += enc.Len()
				}
			}
			// Equal to the Rust side's count when both did the same work.
			b.ReportMetric(float64(tokens), "tokens")
		})
	}
}

// paragraphs splits text at blank lines, as throughput.mjs does.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
