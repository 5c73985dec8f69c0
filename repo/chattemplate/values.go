package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// MaxDepth bounds the nesting of request JSON handed to a template: real
// templates walk tool schemas with recursive macros (gemma's
// format_argument, gpt-oss's render_typescript_type), so nesting is what
// bounds their recursion.
const MaxDepth = 64

// decodeJSON decodes one JSON value into a template value, keeping object
// keys in request order: transformers renders from Python dicts, which keep
// insertion order, so `tools|tojson` must print keys as the client sent
// them (a Go map would sort them).
func decodeJSON(raw []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return jinja.Undefined(), fmt.Errorf("%w: trailing data after the JSON value", ErrInput)
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("%w: %v", ErrInput, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return jinja.Undefined(), fmt.Errorf("%w: JSON nested deeper than %d", ErrInput, MaxDepth)
		}
		if t == '[' {
			return decodeList(d, depth)
		}
		return decodeDict(d, depth)
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return jinja.FromGoValue(t), nil
	case bool:
		return jinja.NewBool(t), nil
	}
	return jinja.None(), nil
}

func decodeList(d *json.Decoder, depth int) (jinja.Value, error) {
	items := []jinja.Value{}
	for d.More() {
		v, err := decodeValue(d, depth+1)
		if err != nil {
			return jinja.Undefined(), err
		}
		items = append(items, v)
	}
	if _, err := d.Token(); err != nil {
		return jinja.Undefined(), fmt.Errorf("%w: %v", ErrInput, err)
	}
	return jinja.NewList(items), nil
}

func decodeDict(d *json.Decoder, depth int) (jinja.Value, error) {
	out := jinja.NewDict()
	dict := out.AsDict()
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("%w: %v", ErrInput, err)
		}
		v, err := decodeValue(d, depth+1)
		if err != nil {
			return jinja.Undefined(), err
		}
		// Python's json.loads keeps the last of repeated keys, at the
		// first key's position: so does Dict.Set.
		dict.Set(k.(string), v)
	}
	if _, err := d.Token(); err != nil {
		return jinja.Undefined(), fmt.Errorf("%w: %v", ErrInput, err)
	}
	return out, nil
}

// messagesValue decodes the request's messages and shapes them as Hugging
// Face templates expect them.
func messagesValue(raw json.RawMessage) (jinja.Value, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return v, fmt.Errorf("messages: %w", err)
	}
	if !v.IsList() {
		return v, fmt.Errorf("%w: messages must be an array", ErrInput)
	}
	for i, m := range v.AsList().Items {
		if !m.IsDict() {
			return v, fmt.Errorf("%w: messages[%d] must be an object", ErrInput, i)
		}
		if err := shapeMessage(m.AsDict()); err != nil {
			return v, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return v, nil
}

// shapeMessage flattens text content parts and parses tool-call arguments.
//
// OpenAI clients may send content as [{type:"text", text}] parts, which
// most templates print as a string: the parts are joined with "\n", as
// vLLM does for templates that take string content
// (vllm-project/vllm vllm/entrypoints/chat_utils.py). OpenAI sends a tool
// call's function.arguments as a JSON string while templates print them
// with tojson or iterate them as a mapping; vLLM parses them into a dict
// (same file, _postprocess_messages), and so does this.
func shapeMessage(m *jinja.Dict) error {
	if c, ok := m.Get("content"); ok && c.IsList() {
		parts := make([]string, 0, c.AsList().Len())
		for j, p := range c.AsList().Items {
			text, err := textPart(p)
			if err != nil {
				return fmt.Errorf("content[%d]: %w", j, err)
			}
			parts = append(parts, text)
		}
		m.Set("content", jinja.NewString(strings.Join(parts, "\n")))
	}
	calls, ok := m.Get("tool_calls")
	if !ok || !calls.IsList() {
		return nil
	}
	for _, c := range calls.AsList().Items {
		if !c.IsDict() {
			continue
		}
		fn, ok := c.AsDict().Get("function")
		if !ok || !fn.IsDict() {
			continue
		}
		args, ok := fn.AsDict().Get("arguments")
		if !ok || !args.IsString() {
			continue
		}
		parsed, err := decodeJSON([]byte(args.AsString()))
		if err == nil && parsed.IsDict() {
			fn.AsDict().Set("arguments", parsed)
		}
	}
	return nil
}

func textPart(p jinja.Value) (string, error) {
	if !p.IsDict() {
		return "", fmt.Errorf("%w: a content part must be an object", ErrInput)
	}
	typ, _ := p.AsDict().Get("type")
	text, ok := p.AsDict().Get("text")
	if !typ.IsString() || typ.AsString() != "text" || !ok || !text.IsString() {
		return "", fmt.Errorf("%w: only content parts of type \"text\" with a string text are supported", ErrInput)
	}
	return text.AsString(), nil
}
