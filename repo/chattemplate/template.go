// Package chattemplate renders a text-generation model's Hugging Face chat
// template: the Jinja program in the folder's tokenizer_config.json
// (`chat_template`) or chat_template.jinja that turns OpenAI-style messages
// into the prompt the model was trained on.
//
// Rendering follows transformers' environment
// (huggingface/transformers src/transformers/utils/chat_template_utils.py
// _compile_jinja_template and render_jinja_template): trim_blocks and
// lstrip_blocks, loop controls, raise_exception, strftime_now, tojson as
// Python's json.dumps with ensure_ascii=False, the {% generation %} tag,
// and the variables messages, tools, documents, add_generation_prompt and
// the tokenizer's special tokens. The Jinja engine is
// github.com/ardanlabs/jinja; request JSON reaches it with its object keys
// in request order.
package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/ardanlabs/jinja"
)

var (
	// ErrNoTemplate marks a model folder without a chat template.
	ErrNoTemplate = errors.New("chattemplate: the model has no chat template")
	// ErrConfig marks a chat template or tokenizer_config.json that cannot
	// be read or compiled.
	ErrConfig = errors.New("chattemplate: bad chat template")
	// ErrInput marks request data (messages, tools, ...) a template cannot
	// be given.
	ErrInput = errors.New("chattemplate: bad input")
	// ErrRender marks a template that failed for this request, by its own
	// raise_exception or by a runtime error.
	ErrRender = errors.New("chattemplate: rendering failed")
	// ErrLimit marks a render that ran past Config.Timeout or wrote more
	// than Config.MaxOutput bytes.
	ErrLimit = errors.New("chattemplate: render limit exceeded")
)

const (
	// DefaultMaxOutput bounds a rendered prompt: far above any context
	// window a text model takes.
	DefaultMaxOutput = 8 << 20
	// DefaultTimeout bounds one render; real templates take well under a
	// millisecond.
	DefaultTimeout = 2 * time.Second
	// maxRange is jinja2's sandbox MAX_RANGE (pallets/jinja
	// src/jinja2/sandbox.py), which transformers' ImmutableSandboxedEnvironment
	// applies to range().
	maxRange = 100000
)

// Config bounds renders and sets strftime_now's clock. Zero fields take the
// defaults.
type Config struct {
	MaxOutput int           // bytes of prompt; DefaultMaxOutput when 0
	Timeout   time.Duration // per render, slot wait included; DefaultTimeout when 0
	MaxSteps  int           // loop iterations and macro calls per render; DefaultMaxSteps when 0
	// Concurrency is how many renders run at once; a render past its
	// Timeout keeps its slot until it ends, so a template that loops for
	// long holds at most this many goroutines. 2×GOMAXPROCS when 0.
	Concurrency int
	Now         func() time.Time // strftime_now's clock; time.Now when nil
}

// Template is a compiled chat template with the tokenizer's special tokens.
// It is safe for concurrent use.
type Template struct {
	tpl     *jinja.Template
	special map[string]jinja.Value
	cfg     Config
	slots   chan struct{}
}

// Chat is what one request gives a template. Raw JSON fields are decoded
// with their key order kept; absent or null Tools and Documents render as
// none.
type Chat struct {
	Messages            json.RawMessage // a JSON array of message objects
	Tools               json.RawMessage
	Documents           json.RawMessage
	AddGenerationPrompt bool
	// Kwargs is a JSON object of extra template variables (vLLM's
	// chat_template_kwargs, such as enable_thinking); it cannot replace
	// the variables above or the special tokens.
	Kwargs json.RawMessage
}

// Parse compiles a template source. special holds the tokenizer's special
// tokens by name (bos_token, eos_token, ...), each a string or a []string.
func Parse(src string, special map[string]any, cfg Config) (t *Template, err error) {
	defer func() {
		// The engine is not known to be panic-free on every input; a
		// broken template must not take the server down.
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: compiling: %v", ErrConfig, r)
		}
	}()
	// The template as written must compile, so the engine's errors are
	// the ones reported; then it is compiled with its hooks.
	src = renameTojson(src)
	if err := checkNesting(src, maxNesting); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if _, err := jinja.Compile(src); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// Each `~`, `+` and `*` of a chain nests one hook call deeper.
	hooked := instrument(src)
	if err := checkNesting(hooked, 4*maxNesting); err != nil {
		return nil, fmt.Errorf("%w: instrumented: %w", ErrConfig, err)
	}
	tpl, err := jinja.Compile(hooked)
	if err != nil {
		return nil, fmt.Errorf("%w: instrumenting: %w", ErrConfig, err)
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t = &Template{tpl: tpl, special: make(map[string]jinja.Value, len(special)), cfg: cfg,
		slots: make(chan struct{}, cfg.Concurrency)}
	for k, v := range special {
		t.special[k] = jinja.FromGoValue(v)
	}
	return t, nil
}

// Render renders the template for one request. Errors wrap ErrInput,
// ErrRender or ErrLimit (all the client's to see), or the context's error.
func (t *Template) Render(ctx context.Context, c Chat) (string, error) {
	m := newMeter(t.cfg.MaxOutput, t.cfg.MaxSteps)
	vars, err := t.vars(c, m)
	if err != nil {
		return "", err
	}
	timer := time.NewTimer(t.cfg.Timeout)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
	case <-timer.C:
		return "", fmt.Errorf("%w: no render slot within %v", ErrLimit, t.cfg.Timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	// The engine takes no context, so a render runs on its own goroutine
	// and one that overruns is left to finish in its slot.
	go func() {
		defer func() { <-t.slots }()
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("%w: %v", ErrRender, r)}
			}
		}()
		out, err := t.tpl.RenderValues(vars)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err != nil && m.err != nil:
			return "", m.err
		case r.err != nil && errors.Is(r.err, ErrRender):
			return "", r.err
		case r.err != nil:
			return "", fmt.Errorf("%w: %w", ErrRender, r.err)
		case len(r.out) > t.cfg.MaxOutput:
			return "", fmt.Errorf("%w: the prompt is %d bytes, over %d", ErrLimit, len(r.out), t.cfg.MaxOutput)
		}
		return r.out, nil
	case <-timer.C:
		// The render's next loop iteration or macro call ends it.
		m.stopped.Store(true)
		return "", fmt.Errorf("%w: %w: rendering took over %v", ErrRunaway, ErrLimit, t.cfg.Timeout)
	case <-ctx.Done():
		m.stopped.Store(true)
		return "", ctx.Err()
	}
}

// vars builds the render's variables as transformers passes them.
func (t *Template) vars(c Chat, m *meter) (map[string]jinja.Value, error) {
	vars := make(map[string]jinja.Value, 8+len(t.special))
	if len(c.Kwargs) > 0 && string(c.Kwargs) != "null" {
		kw, err := decodeJSON(c.Kwargs)
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs: %w", err)
		}
		if !kw.IsDict() {
			return nil, fmt.Errorf("%w: chat_template_kwargs must be an object", ErrInput)
		}
		for _, k := range kw.AsDict().Keys {
			vars[k], _ = kw.AsDict().Get(k)
		}
	}
	for k, v := range t.special {
		vars[k] = v
	}
	msgs, err := messagesValue(c.Messages)
	if err != nil {
		return nil, err
	}
	vars["messages"] = msgs
	for name, raw := range map[string]json.RawMessage{"tools": c.Tools, "documents": c.Documents} {
		vars[name] = jinja.None()
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		vars[name] = v
	}
	vars["add_generation_prompt"] = jinja.NewBool(c.AddGenerationPrompt)
	for name, hook := range m.hooks() {
		vars[name] = hook
	}
	// Variables shadow the engine's globals of the same name.
	vars[tojsonFilter] = jinja.NewCallable("tojson", pyTojson)
	vars["range"] = jinja.NewCallable("range", boundedRange)
	now := t.cfg.Now
	vars["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(strftime(now(), args[0].AsString())), nil
	})
	return vars, nil
}

// boundedRange is range() limited as jinja2's sandbox limits it.
func boundedRange(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 1 || len(args) > 3 {
		return jinja.Undefined(), fmt.Errorf("range expected 1 to 3 arguments, got %d", len(args))
	}
	n := make([]int64, len(args))
	for i, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range takes integers, not %s", a.String())
		}
		n[i] = a.AsInt()
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(n) > 1 {
		start, stop = n[0], n[1]
	}
	if len(n) == 3 {
		step = n[2]
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range() arg 3 must not be zero")
	}
	var count int64
	switch {
	case step > 0 && stop > start:
		count = (stop-start-1)/step + 1
	case step < 0 && start > stop:
		count = (start-stop-1)/(-step) + 1
	}
	if count < 0 || count > maxRange {
		return jinja.Undefined(), fmt.Errorf("range too big: the sandbox blocks ranges larger than %d", maxRange)
	}
	items := make([]jinja.Value, count)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}
