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

func render(t *testing.T, src, messages string, cfg Config) (string, error) {
	t.Helper()
	tpl, err := Parse(src, map[string]any{"bos_token": "<s>"}, cfg)
	if err != nil {
		return "", err
	}
	return tpl.Render(context.Background(), Chat{Messages: json.RawMessage(messages), AddGenerationPrompt: true})
}

func TestRender(t *testing.T) {
	const user = `[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, src, messages string
		cfg                 Config
		want                string
		wantErr             error
		errText             string
	}{
		{name: "plain", src: `{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}{{ add_generation_prompt }}`,
			messages: user, want: "<s>user:hiTrue"},
		{name: "key order kept", src: `{{ messages[0] | tojson }}`, messages: `[{"z":1,"role":"user","a":[true,null,1.5]}]`,
			want: `{"z": 1, "role": "user", "a": [true, null, 1.5]}`},
		{name: "repeated key keeps first place", src: `{{ messages[0] | tojson }}`, messages: `[{"a":1,"b":2,"a":3}]`, want: `{"a": 3, "b": 2}`},
		{name: "big int stays int", src: `{{ messages[0].n | tojson }}`, messages: `[{"n":9007199254740993}]`, want: `9007199254740993`},
		{name: "tools none when absent", src: `{{ tools is none }} {{ documents is none }}`, messages: user, want: "True True"},
		{name: "text parts joined", src: `{{ messages[0].content }}`,
			messages: `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`, want: "a\nb"},
		{name: "arguments string parsed", src: `{{ messages[0].tool_calls[0].function.arguments.x }}`,
			messages: `[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"x\":7}"}}]}]`, want: "7"},
		{name: "arguments not JSON kept", src: `{{ messages[0].tool_calls[0].function.arguments }}`,
			messages: `[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}]`, want: "{oops"},
		{name: "raise_exception", src: `{{ raise_exception("roles must alternate") }}`, messages: user,
			wantErr: ErrRender, errText: "roles must alternate"},
		{name: "runtime error", src: `{{ messages | nosuchfilter }}`, messages: user, wantErr: ErrRender},
		{name: "negative repeat recovered", src: `{{ 'a' * -1 }}`, messages: user, wantErr: ErrRender},
		{name: "range bounded", src: `{% for i in range(100001) %}{% endfor %}`, messages: user, wantErr: ErrRender, errText: "range too big"},
		{name: "range at the bound", src: `{{ range(0, 100000, 7) | length }} {{ range(5, 0, -2) | list }}`, messages: user, want: "14286 [5, 3, 1]"},
		{name: "output bounded", src: `{% for i in range(1000) %}0123456789{% endfor %}`, messages: user,
			cfg: Config{MaxOutput: 9999}, wantErr: ErrLimit},
		{name: "messages not an array", src: `x`, messages: `{"role":"user"}`, wantErr: ErrInput},
		{name: "message not an object", src: `x`, messages: `["hi"]`, wantErr: ErrInput},
		{name: "image part refused", src: `x`, messages: `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`,
			wantErr: ErrInput, errText: "content[0]"},
		{name: "too deep", src: `x`, messages: `[{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]`, wantErr: ErrInput, errText: "deeper"},
		{name: "trailing data", src: `x`, messages: user + `[]`, wantErr: ErrInput},
		{name: "truncated", src: `x`, messages: `[{"role":`, wantErr: ErrInput},
		{name: "compile error", src: `{% if %}`, messages: user, wantErr: ErrConfig},
		{name: "unclosed block", src: `{% for m in messages %}`, messages: user, wantErr: ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := render(t, tt.src, tt.messages, tt.cfg)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.errText)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRenderKwargs(t *testing.T) {
	tpl, err := Parse(`{{ enable_thinking }} {{ bos_token }} {{ messages | length }} {{ add_generation_prompt }}`,
		map[string]any{"bos_token": "<s>"}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(context.Background(), Chat{Messages: json.RawMessage(`[]`),
		Kwargs: json.RawMessage(`{"enable_thinking":false,"bos_token":"X","messages":"X","add_generation_prompt":true}`)})
	if want := "False <s> 0 False"; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q (kwargs must not replace the fixed variables)", got, err, want)
	}
	if _, err := tpl.Render(context.Background(), Chat{Messages: json.RawMessage(`[]`), Kwargs: json.RawMessage(`[1]`)}); !errors.Is(err, ErrInput) {
		t.Fatalf("array kwargs: err = %v, want ErrInput", err)
	}
}

// slowSrc loops 2 million times: long enough to overrun a 20 ms limit,
// short enough that the abandoned render ends soon after the test.
const slowSrc = `{% for i in range(100000) %}{% for j in range(20) %}{% endfor %}{% endfor %}done`

func TestRenderTimeout(t *testing.T) {
	tpl, err := Parse(slowSrc, nil, Config{Timeout: 20 * time.Millisecond, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	chat := Chat{Messages: json.RawMessage(`[]`)}
	start := time.Now()
	if _, err := tpl.Render(context.Background(), chat); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "took over") {
		t.Fatalf("err = %v, want ErrLimit for the time", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Render returned after %v, want about the 20ms limit", d)
	}
	// A render that holds the only slot keeps the next one waiting.
	tpl.slots <- struct{}{}
	if _, err := tpl.Render(context.Background(), chat); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "slot") {
		t.Fatalf("second render: err = %v, want ErrLimit for want of a slot", err)
	}
	<-tpl.slots
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tpl.Render(ctx, chat); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v, want context.Canceled", err)
	}
}

func TestLoad(t *testing.T) {
	const tpl = `{{ bos_token }}|{{ eos_token }}|{{ additional_special_tokens | join(',') }}|{{ messages[0].content }}`
	named := `[{"name":"tool_use","template":"T"},{"name":"default","template":` + jsonString(tpl) + `}]`
	tests := []struct {
		name    string
		files   map[string]string
		want    string
		wantErr error
	}{
		{name: "string template, AddedToken specials", files: map[string]string{"tokenizer_config.json": `{"chat_template":` + jsonString(tpl) +
			`,"bos_token":{"__type":"AddedToken","content":"<|begin|>","lstrip":false},"eos_token":"<|end|>","pad_token":null,` +
			`"additional_special_tokens":["<a>",{"content":"<b>"}]}`}, want: "<|begin|>|<|end|>|<a>,<b>|hi"},
		{name: "named templates take default", files: map[string]string{"tokenizer_config.json": `{"chat_template":` + named + `,"bos_token":"B"}`},
			want: "B|||hi"},
		{name: "chat_template.jinja wins", files: map[string]string{"tokenizer_config.json": `{"chat_template":"old","eos_token":"E"}`,
			"chat_template.jinja": tpl}, want: "|E||hi"},
		{name: "jinja file alone", files: map[string]string{"chat_template.jinja": `{{ messages[0].content }}!`}, want: "hi!"},
		{name: "no template", files: map[string]string{"tokenizer_config.json": `{"bos_token":"B"}`}, wantErr: ErrNoTemplate},
		{name: "empty folder", files: map[string]string{}, wantErr: ErrNoTemplate},
		{name: "named without default", files: map[string]string{"tokenizer_config.json": `{"chat_template":[{"name":"rag","template":"x"}]}`},
			wantErr: ErrNoTemplate},
		{name: "bad JSON", files: map[string]string{"tokenizer_config.json": `{"chat_template":`}, wantErr: ErrConfig},
		{name: "template of wrong type", files: map[string]string{"tokenizer_config.json": `{"chat_template":7}`}, wantErr: ErrConfig},
		{name: "bad special token", files: map[string]string{"tokenizer_config.json": `{"chat_template":"x","bos_token":7}`}, wantErr: ErrConfig},
		{name: "bad template", files: map[string]string{"chat_template.jinja": `{% for %}`}, wantErr: ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tp, err := Load(dir, Config{})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tp.Render(context.Background(), Chat{Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestTojson checks the tojson filter against outputs of CPython 3.11's
// json.dumps with the same arguments.
func TestTojson(t *testing.T) {
	tests := []struct{ expr, messages, want string }{
		{`messages[0] | tojson(ensure_ascii=true)`, `[{"b":1.0,"a":[1e16,1e15,1e-5,0.0001,0.1,-2.5e-300,123456789.125],"é\u007f\u0001😀":null}]`,
			`{"b": 1.0, "a": [1e+16, 1000000000000000.0, 1e-05, 0.0001, 0.1, -2.5e-300, 123456789.125], "\u00e9\u007f\u0001\ud83d\ude00": null}`},
		{`messages[0] | tojson(indent=2, sort_keys=true)`, `[{"b":[1,{}],"a":[]}]`, "{\n  \"a\": [],\n  \"b\": [\n    1,\n    {}\n  ]\n}"},
		{`messages[0] | tojson(separators=(',', ':'))`, `[{"b":[1,2]}]`, `{"b":[1,2]}`},
		{`messages[0] | tojson`, `[{"s":"<&> \"q\" \\ \n\t é\u2028"}]`, "{\"s\": \"<&> \\\"q\\\" \\\\ \\n\\t é\u2028\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := render(t, "{{ "+tt.expr+" }}", tt.messages, Config{})
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2026, 3, 4, 15, 6, 7, 0, time.UTC)
	tests := []struct{ format, want string }{
		{"%d %b %Y", "04 Mar 2026"},
		{"%-d %B %y", "4 March 26"},
		{"%A %a %j %H:%M:%S %I%p", "Wednesday Wed 063 15:06:07 03PM"},
		{"%F %T %e 100%% %Q %", "2026-03-04 15:06:07  4 100% %Q %"},
	}
	for _, tt := range tests {
		if got := strftime(at, tt.format); got != tt.want {
			t.Errorf("strftime(%q) = %q, want %q", tt.format, got, tt.want)
		}
	}
}

// TestLoadOutside: a chat_template.jinja that links outside the model
// folder is refused, not read.
func TestLoadOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.jinja")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "chat_template.jinja")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig for a link out of the folder", err)
	}
}
