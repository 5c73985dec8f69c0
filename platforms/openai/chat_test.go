package openai

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/tokenizer"
)

// TestGeneration runs the chat and completion routes over a real listener
// against real Python models; one server for every case, since its
// workers take a while to start.
func TestGeneration(t *testing.T) {
	base, root := startChat(t)
	t.Run("chat", func(t *testing.T) { testChat(t, base) })
	t.Run("chat stream", func(t *testing.T) { testChatStream(t, base) })
	t.Run("completions", func(t *testing.T) { testCompletions(t, base) })
	t.Run("sampling parameters", func(t *testing.T) { testSampling(t, base) })
	t.Run("errors", func(t *testing.T) { testGenerationErrors(t, base) })
	t.Run("mid-stream error", func(t *testing.T) { testMidStreamError(t, base) })
	t.Run("disconnect cancels", func(t *testing.T) { testDisconnect(t, base, root) })
	t.Run("disconnect cancels, not streaming", func(t *testing.T) { testDisconnectWhole(t, base, root) })
	t.Run("client not reading cancels", func(t *testing.T) { testStalledClient(t, base, root) })
}

type chatAnswer struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         *string         `json:"text"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// plainUsage is what the server counts for gen_plain with its
// tokenizer.json: the prompt without special tokens (a template's prompt
// holds its own), the answer likewise.
func plainUsage(t *testing.T, prompt, answer string, special bool) usage {
	t.Helper()
	data, err := os.ReadFile(chatTokenizer)
	servertest.Must(t, err)
	tok, err := tokenizer.Parse(data)
	servertest.Must(t, err)
	tok, err = tok.WithTruncation(nil)
	servertest.Must(t, err)
	p, err := tok.Encode(prompt, special)
	servertest.Must(t, err)
	a, err := tok.Encode(answer, false)
	servertest.Must(t, err)
	return usage{len(p.IDs), len(a.IDs), len(p.IDs) + len(a.IDs)}
}

func testChat(t *testing.T, base string) {
	hostile := []map[string]any{{"role": "system", "content": "Be terse."}, {"role": "user", "content": `Hi 😀 "there"`}}
	// Raw JSON: the template must see the keys in the client's order.
	tools := json.RawMessage(`[{"role": "user", "content": "Weather?"},
		{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Tōkyō\"}"}}]},
		{"role": "tool", "content": "21"}]`)
	tests := []struct {
		name, model string
		body        map[string]any
		prompt      string // what the model received: the answer is "<prompt>"
		usage       *usage
		finish      string
	}{
		{name: "decoupled, model counts", model: "gen_stream", body: map[string]any{"messages": hostile},
			prompt: `<s>[system]Be terse.[user]Hi 😀 "there"[assistant]`, usage: &usage{4, 13, 17}, finish: "stop"},
		{name: "tools and tool calls", model: "gen_stream", body: map[string]any{"messages": tools, "tools": json.RawMessage(`[{"type": "function", "function": {"name": "w"}}]`)},
			prompt: "<s>[user]Weather?[assistant]{\"city\": \"Tōkyō\"}[tool]21tools=[{\"type\": \"function\", \"function\": {\"name\": \"w\"}}]\n[assistant]",
			usage:  &usage{7, 31, 38}, finish: "stop"},
		{name: "max_tokens reached", model: "gen_stream", body: map[string]any{"messages": hostile, "max_tokens": 3},
			prompt: `<s>[system]Be terse.[user]Hi 😀 "there"[assistant]`, usage: &usage{4, 3, 7}, finish: "length"},
		{name: "one response, named default template", model: "gen_plain", body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}}}},
			prompt: "user: Hi\nassistant:", finish: "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["model"] = tt.model
			status, body := post(t, base+"/v1/chat/completions", tt.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var a chatAnswer
			servertest.Must(t, json.Unmarshal(body, &a))
			answer := "<" + tt.prompt + ">"
			if tt.finish == "length" {
				answer = answer[:12] // three pieces of four bytes
			}
			switch {
			case !strings.HasPrefix(a.ID, "chatcmpl-") || a.Object != "chat.completion" || a.Model != tt.model || a.Created < time.Now().Add(-time.Hour).Unix():
				t.Fatalf("envelope %s", body)
			case len(a.Choices) != 1 || a.Choices[0].Message == nil || a.Choices[0].Message.Role != "assistant" || string(a.Choices[0].Logprobs) != "null":
				t.Fatalf("choices %s", body)
			case a.Choices[0].Message.Content != answer:
				t.Fatalf("content %q, want %q", a.Choices[0].Message.Content, answer)
			case a.Choices[0].FinishReason != tt.finish:
				t.Fatalf("finish_reason %q, want %q", a.Choices[0].FinishReason, tt.finish)
			}
			want := tt.usage
			if want == nil {
				u := plainUsage(t, tt.prompt, answer, false)
				want = &u
			}
			if a.Usage == nil || *a.Usage != *want {
				t.Fatalf("usage %+v, want %+v", a.Usage, want)
			}
		})
	}
}

// checkStream checks a chat stream's events: the role first, content
// deltas that join into want, the finish_reason chunk, the usage chunk
// when asked (usage null before), then [DONE]. It returns the usage.
func checkStream(t *testing.T, evs []string, chat, withUsage bool, model, want, finish string) *usage {
	t.Helper()
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("events %q: want at least a chunk, the finish and [DONE]", evs)
	}
	evs = evs[:len(evs)-1]
	var got strings.Builder
	var id string
	var u *usage
	for i, ev := range evs {
		c, raw := parseChunk(t, ev)
		if i == 0 {
			id = c.ID
		}
		object, prefix := "text_completion", "cmpl-"
		if chat {
			object, prefix = "chat.completion.chunk", "chatcmpl-"
		}
		if c.ID != id || !strings.HasPrefix(id, prefix) || c.Object != object || c.Model != model {
			t.Fatalf("event %d %s: envelope", i, ev)
		}
		if _, has := raw["usage"]; has != withUsage {
			t.Fatalf("event %d %s: usage present %v, want %v", i, ev, has, withUsage)
		}
		last := i == len(evs)-1
		if withUsage && last {
			if len(c.Choices) != 0 || c.Usage == nil {
				t.Fatalf("usage chunk %s: want no choices and a usage", ev)
			}
			u = c.Usage
			continue
		}
		if len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("event %d %s: want one choice and no usage", i, ev)
		}
		ch := c.Choices[0]
		finishing := i == len(evs)-1 || withUsage && i == len(evs)-2
		switch {
		case finishing && (ch.FinishReason == nil || *ch.FinishReason != finish):
			t.Fatalf("finish chunk %s: want finish_reason %q", ev, finish)
		case !finishing && ch.FinishReason != nil:
			t.Fatalf("event %d %s: finish_reason before the end", i, ev)
		case chat && i == 0 && (ch.Delta == nil || ch.Delta.Role == nil || *ch.Delta.Role != "assistant"):
			t.Fatalf("first chunk %s: want the assistant role", ev)
		case chat && i > 0 && ch.Delta.Role != nil:
			t.Fatalf("event %d %s: role after the first chunk", i, ev)
		case chat && finishing && ch.Delta.Content != nil:
			t.Fatalf("finish chunk %s: want an empty delta", ev)
		case chat && !finishing && ch.Delta.Content != nil:
			got.WriteString(*ch.Delta.Content)
		case !chat && ch.Text != nil:
			got.WriteString(*ch.Text)
		}
	}
	if got.String() != want {
		t.Fatalf("streamed text %q, want %q", got.String(), want)
	}
	return u
}

func testChatStream(t *testing.T, base string) {
	msgs := []any{map[string]any{"role": "user", "content": "Hi 😀"}}
	t.Run("decoupled, usage", func(t *testing.T) {
		evs := events(t, base+"/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": msgs, "stream": true,
			"stream_options": map[string]any{"include_usage": true}})
		want := "<<s>[user]Hi 😀[assistant]>"
		if len(evs) != 1+7+1+1+1 { // role, 7 pieces of 4 bytes, finish, usage, [DONE]
			t.Fatalf("%d events, want each piece as its own: %q", len(evs), evs)
		}
		u := checkStream(t, evs, true, true, "gen_stream", want, "stop")
		if *u != (usage{2, 7, 9}) {
			t.Fatalf("usage %+v", u)
		}
	})
	t.Run("decoupled, length", func(t *testing.T) {
		evs := events(t, base+"/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": msgs, "stream": true, "max_completion_tokens": 2})
		checkStream(t, evs, true, false, "gen_stream", "<<s>[use", "length")
	})
	t.Run("one response", func(t *testing.T) {
		evs := events(t, base+"/v1/chat/completions", map[string]any{"model": "gen_plain", "messages": msgs, "stream": true,
			"stream_options": map[string]any{"include_usage": true}})
		prompt := "user: Hi 😀\nassistant:"
		u := checkStream(t, evs, true, true, "gen_plain", "<"+prompt+">", "stop")
		if want := plainUsage(t, prompt, "<"+prompt+">", false); *u != want {
			t.Fatalf("usage %+v, want %+v", u, want)
		}
	})
}

func testCompletions(t *testing.T, base string) {
	t.Run("plain", func(t *testing.T) {
		status, body := post(t, base+"/v1/completions", map[string]any{"model": "gen_notpl", "prompt": []string{"Once upon"}})
		var a chatAnswer
		servertest.Must(t, json.Unmarshal(body, &a))
		want := plainUsage(t, "Once upon", "<Once upon>", true)
		if status != http.StatusOK || !strings.HasPrefix(a.ID, "cmpl-") || a.Object != "text_completion" || len(a.Choices) != 1 ||
			a.Choices[0].Text == nil || *a.Choices[0].Text != "<Once upon>" || a.Choices[0].FinishReason != "stop" {
			t.Fatalf("status %d: %s", status, body)
		}
		if a.Usage != nil {
			t.Fatalf("usage %+v from a folder without tokenizer.json (want none; %+v had it been gen_plain)", a.Usage, want)
		}
	})
	t.Run("echo", func(t *testing.T) {
		status, body := post(t, base+"/v1/completions", map[string]any{"model": "gen_stream", "prompt": "abc", "echo": true})
		var a chatAnswer
		servertest.Must(t, json.Unmarshal(body, &a))
		if status != http.StatusOK || *a.Choices[0].Text != "abc<abc>" {
			t.Fatalf("status %d: %s", status, body)
		}
	})
	t.Run("stream", func(t *testing.T) {
		evs := events(t, base+"/v1/completions", map[string]any{"model": "gen_stream", "prompt": "Once upon a time", "stream": true,
			"stream_options": map[string]any{"include_usage": true}})
		u := checkStream(t, evs, false, true, "gen_stream", "<Once upon a time>", "stop")
		if *u != (usage{4, 5, 9}) {
			t.Fatalf("usage %+v", u)
		}
	})
}

func testSampling(t *testing.T, base string) {
	tests := []struct {
		name, route string
		body        map[string]any
		want        string
	}{
		{name: "all set", route: "/v1/completions",
			body: map[string]any{"prompt": "SHOW_PARAMS", "max_tokens": 100, "temperature": 0, "top_p": 0.5, "stop": []string{"x", "y"}, "seed": 7},
			want: `{"exclude_input_in_output": true, "sampling_parameters": {"max_tokens": 100, "seed": 7, "stop": ["x", "y"], "temperature": 0, "top_p": 0.5}, "stream": false}`},
		{name: "none set", route: "/v1/completions", body: map[string]any{"prompt": "SHOW_PARAMS"},
			want: `{"exclude_input_in_output": true, "sampling_parameters": null, "stream": false}`},
		{name: "chat, stop string, max_completion_tokens over max_tokens", route: "/v1/chat/completions",
			body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "SHOW_PARAMS"}}, "stop": "\n", "max_tokens": 1, "max_completion_tokens": 50},
			want: `{"exclude_input_in_output": true, "sampling_parameters": {"max_tokens": 50, "stop": ["\n"]}, "stream": false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["model"] = "gen_stream"
			status, body := post(t, base+tt.route, tt.body)
			var a chatAnswer
			servertest.Must(t, json.Unmarshal(body, &a))
			if status != http.StatusOK || len(a.Choices) != 1 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := ""
			if a.Choices[0].Text != nil {
				got = *a.Choices[0].Text
			} else {
				got = a.Choices[0].Message.Content
			}
			if got != tt.want {
				t.Fatalf("the model received %s, want %s", got, tt.want)
			}
		})
	}
}

func testGenerationErrors(t *testing.T, base string) {
	user := []any{map[string]any{"role": "user", "content": "hi"}}
	tests := []struct {
		name, route string
		body        any
		status      int
		param, code string
		message     string
	}{
		{"n", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": user, "n": 2}, 400, "n", "", "n must be 1"},
		{"stream_options without stream", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": user, "stream_options": map[string]any{"include_usage": true}}, 400, "stream_options", "", "only allowed"},
		{"temperature", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": user, "temperature": 3}, 400, "temperature", "", "between 0 and 2"},
		{"top_p", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": "x", "top_p": 0}, 400, "top_p", "", "top_p"},
		{"max_tokens", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": "x", "max_tokens": 0}, 400, "max_tokens", "", "at least 1"},
		{"too many stops", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": "x", "stop": []string{"a", "b", "c", "d", "e"}}, 400, "stop", "", "at most 4"},
		{"stop of numbers", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": "x", "stop": []int{1}}, 400, "stop", "", "stop must be"},
		{"no messages", "/v1/chat/completions", map[string]any{"model": "gen_stream"}, 400, "messages", "", "non-empty"},
		{"empty messages", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": []any{}}, 400, "messages", "", "non-empty"},
		{"messages not an array", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": "hi"}, 400, "messages", "", "non-empty"},
		{"image part", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:"}}}}}}, 400, "messages", "", "text"},
		{"template raises", "/v1/chat/completions", map[string]any{"model": "gen_stream", "messages": []any{map[string]any{"role": "assistant", "content": "x"}}},
			400, "messages", "", "must not be the assistant's"},
		{"no template", "/v1/chat/completions", map[string]any{"model": "gen_notpl", "messages": user}, 400, "model", "", "no chat template"},
		{"template runs away", "/v1/chat/completions", map[string]any{"model": "gen_runaway", "messages": user}, 500, "", "", "macros nested over 256 deep"},
		{"not a generator", "/v1/chat/completions", map[string]any{"model": "simple", "messages": user}, 400, "model", "", "generator"},
		{"unknown model", "/v1/chat/completions", map[string]any{"model": "nope", "messages": user}, 404, "model", "model_not_found", "does not exist"},
		{"no model", "/v1/completions", map[string]any{"prompt": "x"}, 400, "model", "", "model"},
		{"no prompt", "/v1/completions", map[string]any{"model": "gen_stream"}, 400, "prompt", "", "prompt"},
		{"two prompts", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": []string{"a", "b"}}, 400, "prompt", "", "one string"},
		{"prompt too long", "/v1/completions", map[string]any{"model": "gen_plain", "prompt": strings.Repeat("hello ", 40)}, 400, "prompt", "", "maximum context length is 40 tokens, and the prompt has 42"},
		{"prompt and max_tokens too long", "/v1/chat/completions", map[string]any{"model": "gen_plain", "messages": user, "max_tokens": 36}, 400, "messages", "",
			"maximum context length is 40 tokens, but 41 were asked for (5 in the prompt, 36 for the completion)"},
		{"bad JSON", "/v1/completions", `{"model": "gen_stream", "prompt": `, 400, "", "", "JSON"},
		{"model fails", "/v1/completions", map[string]any{"model": "gen_stream", "prompt": "FAIL_AFTER_2"}, 500, "", "", "broke down"},
		// Nothing streamed yet: the error's own status, not an event.
		{"model fails at once, streaming", "/v1/chat/completions", map[string]any{"model": "gen_stream", "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": "FAIL_NOW"}}}, 500, "", "", "broke down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, base+tt.route, tt.body)
			var e apiError
			if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
				t.Fatalf("status %d, body %s: not OpenAI's error shape", status, body)
			}
			param, code := "", ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if status != tt.status || param != tt.param || code != tt.code || !strings.Contains(e.Error.Message, tt.message) || e.Error.Type == "" ||
				(status >= 500) != (e.Error.Type == serverError) {
				t.Fatalf("status %d, body %s; want %d, param %q, code %q, a message with %q", status, body, tt.status, tt.param, tt.code, tt.message)
			}
		})
	}
}

// testMidStreamError: a model that fails after two pieces: the pieces,
// then OpenAI's error object as a data event (the SDKs raise it), then
// [DONE].
func testMidStreamError(t *testing.T, base string) {
	evs := events(t, base+"/v1/completions", map[string]any{"model": "gen_stream", "prompt": "FAIL_AFTER_2", "stream": true})
	if len(evs) != 4 || evs[3] != "[DONE]" {
		t.Fatalf("events %q: want two pieces, the error and [DONE]", evs)
	}
	var e apiError
	servertest.Must(t, json.Unmarshal([]byte(evs[2]), &e))
	if e.Error == nil || !strings.Contains(e.Error.Message, "broke down") || e.Error.Type != serverError {
		t.Fatalf("error event %s", evs[2])
	}
	for _, ev := range evs[:2] {
		if c, _ := parseChunk(t, ev); len(c.Choices) != 1 || c.Choices[0].Text == nil || *c.Choices[0].Text == "" {
			t.Fatalf("event %s: want a piece of text", ev)
		}
	}
}

// testDisconnect: a client that goes away mid-stream cancels the model's
// request: model.py sees request.is_cancelled() and leaves its marker.
func testDisconnect(t *testing.T, base, root string) {
	marker := filepath.Join(root, "gen_stream", "cancelled")
	servertest.Must(t, os.RemoveAll(marker))
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	servertest.Must(t, err)
	body := `{"model": "gen_stream", "prompt": "SLOW", "stream": true}`
	_, err = conn.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	servertest.Must(t, err)
	buf := make([]byte, 4096)
	servertest.Must(t, conn.SetReadDeadline(time.Now().Add(60*time.Second)))
	var got strings.Builder
	for strings.Count(got.String(), "tick") < 2 {
		n, err := conn.Read(buf)
		servertest.Must(t, err)
		got.Write(buf[:n])
	}
	servertest.Must(t, conn.Close())
	waitCancelled(t, marker)
}

// testDisconnectWhole: the same for a call that does not stream, whose
// client gives up waiting for the whole answer.
func testDisconnectWhole(t *testing.T, base, root string) {
	marker := filepath.Join(root, "gen_stream", "cancelled")
	servertest.Must(t, os.RemoveAll(marker))
	client := &http.Client{Timeout: 300 * time.Millisecond}
	resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model": "gen_stream", "prompt": "SLOW"}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("status %d before the client's timeout: want the model still running", resp.StatusCode)
	}
	waitCancelled(t, marker)
}

// waitCancelled waits for model.py's marker of a cancelled request.
func waitCancelled(t *testing.T, marker string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the model's request was not cancelled 15 s after the client left")
		}
	}
}

// testStalledClient: a client that opens a stream and never reads it
// cannot keep the model generating: once the queue of unsent events is
// full, the model's request is cancelled.
func testStalledClient(t *testing.T, base, root string) {
	marker := filepath.Join(root, "gen_stream", "cancelled")
	servertest.Must(t, os.RemoveAll(marker))
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	servertest.Must(t, err)
	// Closing the connection at the end ends the handler's blocked write.
	defer conn.Close()
	body := `{"model": "gen_stream", "prompt": "FLOOD", "stream": true}`
	_, err = conn.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	servertest.Must(t, err)
	waitCancelled(t, marker)
}
