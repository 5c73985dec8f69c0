package openai

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/inferd/inferd/repo/chattemplate"
)

// FuzzChatRequest reads arbitrary bodies as the chat and completion routes
// do, up to the prompt the model would get: any outcome but a panic or an
// unclassified error is a failure, and valid sampling parameters are
// JSON.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi 😀"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_tokens":5,"temperature":0.5,"top_p":1,"stop":["x"],"seed":1}`,
		`{"model":"m","prompt":["one"],"echo":true,"stop":"\n","max_completion_tokens":3,"n":1}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]}],"tools":[{"type":"function"}]}`,
		`{"model":"m","prompt":null,"stop":[1],"n":2}`,
		`{"messages":{}}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	tpl, err := chattemplate.Parse(`{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}{% endfor %}{{ tools | tojson }}`, nil, chattemplate.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c chatRequest
		if json.Unmarshal(body, &c) == nil {
			if sp, _, err := c.check(); err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Status != 400 {
					t.Fatalf("check: %v is not a 400", err)
				}
			} else if sp != nil && !json.Valid(sp) {
				t.Fatalf("sampling_parameters %q is not JSON", sp)
			}
			_, err := tpl.Render(context.Background(), chattemplate.Chat{Messages: c.Messages, Tools: c.Tools, Kwargs: c.ChatTemplateKwargs, AddGenerationPrompt: true})
			if err != nil && !errors.Is(err, chattemplate.ErrInput) && !errors.Is(err, chattemplate.ErrRender) && !errors.Is(err, chattemplate.ErrLimit) {
				t.Fatalf("Render: %v wraps no sentinel", err)
			}
		}
		var p completionRequest
		if json.Unmarshal(body, &p) == nil {
			if _, err := p.prompt(); err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Param != "prompt" {
					t.Fatalf("prompt: %v is not about prompt", err)
				}
			}
		}
	})
}
