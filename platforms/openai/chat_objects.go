package openai

import (
	"bytes"
	"encoding/json"
)

// The objects of the chat and completion routes, as openai/openai-python
// defines them: types/chat/chat_completion.py, chat_completion_chunk.py,
// types/completion.py, completion_choice.py and completion_usage.py.

type choiceMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type delta struct {
	Role    *string `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// choice is a chat choice (Message or Delta) or a completion choice
// (Text).
type choice struct {
	Index        int            `json:"index"`
	Message      *choiceMessage `json:"message,omitempty"`
	Delta        *delta         `json:"delta,omitempty"`
	Text         *string        `json:"text,omitempty"`
	Logprobs     any            `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type completionObject struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	// Usage is omitted when unknown; a stream asked for usage carries
	// null in every chunk but the last (chat_completion_chunk.py).
	Usage any `json:"usage,omitempty"`
}

var jsonNull = json.RawMessage("null")

func (g *generation) base(object string) completionObject {
	return completionObject{ID: g.id, Object: object, Created: g.created, Model: g.t.name}
}

// object is the whole answer of a call that does not stream.
func (g *generation) object(text, reason string, u *usage) completionObject {
	o := g.base("text_completion")
	c := choice{FinishReason: &reason}
	if g.chat {
		o.Object = "chat.completion"
		c.Message = &choiceMessage{Role: assistantRole, Content: text}
	} else {
		c.Text = &text
	}
	o.Choices = []choice{c}
	if u != nil {
		o.Usage = u
	}
	return o
}

// chunk is one streamed event's JSON: a piece of text, the role (the
// first chat delta) or the finish reason (the last choice chunk).
func (g *generation) chunk(text string, role, finish *string) []byte {
	o := g.base("text_completion")
	c := choice{FinishReason: finish}
	if g.chat {
		o.Object = "chat.completion.chunk"
		c.Delta = &delta{Role: role}
		if role != nil || finish == nil {
			c.Delta.Content = &text
		}
	} else {
		c.Text = &text
	}
	o.Choices = []choice{c}
	if g.includeUsage {
		o.Usage = jsonNull
	}
	return marshal(o)
}

// usageChunk is the chunk stream_options.include_usage asks for, after the
// last choice: no choices, the usage.
func (g *generation) usageChunk(u *usage) []byte {
	o := g.base("text_completion")
	if g.chat {
		o.Object = "chat.completion.chunk"
	}
	o.Choices, o.Usage = []choice{}, u
	return marshal(o)
}

// marshal is json.Marshal without HTML escaping: OpenAI writes "<" as it
// is, and so do chat prompts and their answers.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the objects here always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
