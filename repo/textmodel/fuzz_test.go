package textmodel

import (
	"os"
	"path/filepath"
	"testing"

	mc "github.com/inferd/inferd/repo/modelconfig"
)

// FuzzDescribe: any config.json, tokenizer_config.json and
// 1_Pooling/config.json give a description or an error, never a panic, and
// a description's kind is one of the kinds.
func FuzzDescribe(f *testing.F) {
	f.Add([]byte(crossEncoder), []byte(`{"model_max_length": 512, "bos_token": {"content": "<s>"}}`), []byte(`{"pooling_mode_cls_token": true}`))
	f.Add([]byte(`{"architectures": null, "id2label": []}`), []byte(`{"model_max_length": 1e30, "chat_template": [{"name": 1}]}`), []byte(`{"pooling_mode": "weird"}`))
	f.Add([]byte(`[]`), []byte(`"x"`), []byte(`{"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true}`))
	cfg, err := mc.Parse([]byte(tokenInputs + logitOut))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, hf, tc, pool []byte) {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "config.json"), hf, 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tc, 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "1_Pooling", "config.json"), pool, 0o644))
		m, err := Describe(dir, cfg)
		if err != nil {
			return
		}
		switch m.Kind {
		case None, Reranker, EmbeddingTokens:
		default:
			t.Fatalf("kind %q", m.Kind)
		}
		_, _ = m.TokenizerConfig.BOS(), m.TokenizerConfig.EOS()
	})
}
