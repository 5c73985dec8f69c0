package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/repo/modelconfig"
)

// generation is one chat or completion call once its request is read.
type generation struct {
	t   target
	gen *generator
	req genRequest
	// chat: the chat route's objects; else the completion route's.
	chat         bool
	maxTokens    int64
	includeUsage bool
	// addSpecial counts the prompt with the tokenizer's special tokens
	// (completions; a chat prompt holds its template's own).
	addSpecial bool
	// promptTokens is the prompt's count with the folder's tokenizer, -1
	// without one (checkLength).
	promptTokens int
	id           string
	created      int64
	// roleSent: the chat stream's first chunk, which carries the role,
	// is out (roleChunk).
	roleMu   sync.Mutex
	roleSent bool
}

// roleChunk is the chat stream's first chunk, whose delta carries the
// role, the first time it is asked for; nil after that, and for
// completions. It is sent with the first piece of text, so that a model
// that fails before any answers with the error's status.
func (g *generation) roleChunk() []byte {
	g.roleMu.Lock()
	defer g.roleMu.Unlock()
	if !g.chat || g.roleSent {
		return nil
	}
	g.roleSent = true
	role := assistantRole
	return g.chunk("", &role, nil)
}

func newGeneration(t target, gen *generator, chat bool) *generation {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &generation{t: t, gen: gen, chat: chat, addSpecial: !chat, promptTokens: -1, id: prefix + hex.EncodeToString(b[:]),
		created: time.Now().Unix()}
}

// checkLength counts the prompt with the folder's tokenizer and refuses a
// request the model cannot take: more prompt tokens, plus max_tokens, than
// the model's maximum length (textmodel's MaxLength), as vLLM refuses it
// (vllm-project/vllm vllm/entrypoints/openai/serving_engine.py). Without a
// tokenizer or a known bound there is nothing to check.
func (g *generation) checkLength(param string) error {
	g.promptTokens = g.gen.count(g.req.prompt, g.addSpecial)
	limit := g.t.desc.MaxLength
	if g.promptTokens < 0 || limit <= 0 {
		return nil
	}
	switch {
	case g.maxTokens > 0 && int64(g.promptTokens)+g.maxTokens > int64(limit):
		return invalid(param, "this model's maximum context length is %d tokens, but %d were asked for (%d in the prompt, %d for the completion)",
			limit, int64(g.promptTokens)+g.maxTokens, g.promptTokens, g.maxTokens)
	case g.promptTokens >= limit:
		return invalid(param, "this model's maximum context length is %d tokens, and the prompt has %d", limit, g.promptTokens)
	}
	return nil
}

// tally adds up a run's responses.
type tally struct {
	mu   sync.Mutex
	text strings.Builder
	// in is the model's prompt count (-1: none); out the sum of its
	// output counts, valid while outKnown.
	in, out  int
	outKnown bool
	n        int
}

func newTally() *tally { return &tally{in: -1, outKnown: true} }

func (t *tally) add(o genOutput) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.text.WriteString(o.text)
	if t.in < 0 {
		t.in = o.inputTokens
	}
	if o.outputTokens < 0 {
		t.outKnown = false
	} else {
		t.out += o.outputTokens
	}
	t.n++
}

// usage is the run's token counts: the model's own when it reported
// them, else the folder's tokenizer's (nil without one).
func (g *generation) usage(t *tally) (*usage, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prompt, completion := t.in, -1
	if t.outKnown && t.n > 0 {
		completion = t.out
	}
	if prompt < 0 {
		prompt = g.promptTokens
	}
	if completion < 0 {
		text := t.text.String()
		if g.req.echo {
			text = strings.TrimPrefix(text, g.req.prompt)
		}
		completion = g.gen.count(text, false)
	}
	return newUsage(prompt, completion), completion
}

// call is the pipeline call of g, with its decoder: the request is built
// against the configuration the pipeline looked up, and the forwarded
// headers (--http-header-forward-pattern) are applied as on /infer.
func (s *Server) call(r *http.Request, g *generation) (*infer.Call, infer.Decoder) {
	c := &infer.Call{Protocol: infer.HTTP, Route: r.URL.Path, Model: g.t.name, Version: g.t.version,
		Meta: instances.Header(r.Header), Buffered: true}
	decode := func(cfg *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		req, err := g.req.coreRequest(cfg)
		if err != nil {
			return nil, nil, err
		}
		if fh != nil {
			if err := fh.Apply(req); err != nil {
				return nil, nil, err
			}
		}
		return req, nil, nil
	}
	return c, decode
}

// complete runs g and answers with one JSON object once the model is done.
// A decoupled model's responses are joined (each is a piece of the text).
func (s *Server) complete(w http.ResponseWriter, r *http.Request, g *generation) error {
	t := newTally()
	var result error
	c, decode := s.call(r, g)
	collect := func(resp *core.InferResponse) error {
		o, err := readOutput(resp)
		if err == nil {
			t.add(o)
		}
		return err
	}
	s.api.Pipeline().Run(r.Context(), c, decode, infer.Reply{Shape: infer.ByPolicy, Render: func(resp *core.InferResponse, err error) {
		if err == nil && resp != nil {
			err = collect(resp)
		}
		result = err
	}}, func(resp *core.InferResponse, _ bool) error {
		if resp == nil {
			return nil
		}
		return collect(resp)
	})
	if result != nil {
		return result
	}
	u, completion := g.usage(t)
	writeJSON(w, http.StatusOK, marshal(g.object(t.text.String(), finishReason(g.maxTokens, completion), u)))
	return nil
}

// stream runs g and answers with server-sent events as the model
// produces text. Errors before the first piece of text are ordinary JSON
// answers; once the stream has started, an error is a data object with
// "error".
// The model's sends go to a bounded queue that the handler's goroutine
// writes out, and a client that goes away or stops reading cancels the
// model's request (the request's context ends; Python's
// request.is_cancelled() turns true).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, g *generation) {
	t := newTally()
	var q *sseQueue
	done := make(chan error, 1)
	written := make(chan struct{})
	push := func(resp *core.InferResponse) error {
		o, err := readOutput(resp)
		if err != nil {
			return err
		}
		t.add(o)
		if o.text == "" {
			return nil
		}
		if role := g.roleChunk(); role != nil {
			if err := q.put(role); err != nil {
				return err
			}
		}
		return q.put(g.chunk(o.text, nil, nil))
	}
	reply := infer.Reply{Shape: infer.ByPolicy, Render: func(resp *core.InferResponse, err error) {
		if q == nil { // the call did not start
			writeError(w, openAI, err)
			return
		}
		if err == nil && resp != nil {
			err = push(resp)
		}
		done <- err
		<-written
	}}
	send := func(resp *core.InferResponse, _ bool) error {
		if resp == nil {
			return nil
		}
		return push(resp)
	}
	c, decode := s.call(r, g)
	s.api.Pipeline().Dispatch(r.Context(), c, decode, reply, send, func(_ *infer.Inference, run func(ctx context.Context)) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		q = newSSEQueue(cancel)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			run(ctx)
		}()
		s.writeStream(w, g, t, q, done)
		close(written)
		<-ended
	})
}

// assistantRole is the role of every answer.
const assistantRole = "assistant"

// writeStream writes the stream until the run ends, then its tail: the
// finish_reason chunk, the usage chunk when asked, and [DONE]; or the
// error object.
func (s *Server) writeStream(w http.ResponseWriter, g *generation, t *tally, q *sseQueue, done <-chan error) {
	sw := newSSEWriter(w)
	defer sw.end()
	err := sw.pump(q, done)
	if q.failed() != nil && err == q.failed() {
		return // the client is gone or not reading: nothing more to write
	}
	switch {
	case err != nil && !sw.started:
		// Nothing sent yet (a model that failed or refused at once): the
		// error's own status.
		writeError(w, openAI, err)
		return
	case err != nil:
		_ = sw.write(errorObject(err))
		_ = sw.write(doneEvent)
		return
	}
	u, completion := g.usage(t)
	reason := finishReason(g.maxTokens, completion)
	var tail [][]byte
	if role := g.roleChunk(); role != nil {
		tail = append(tail, role)
	}
	tail = append(tail, g.chunk("", nil, &reason))
	if g.includeUsage {
		if u == nil {
			u = &usage{}
		}
		tail = append(tail, g.usageChunk(u))
	}
	for _, ev := range append(tail, doneEvent) {
		if sw.write(ev) != nil {
			return
		}
	}
}

// errorObject is err as OpenAI's error body, for a data event.
func errorObject(err error) []byte {
	e := classify(err)
	b, _ := json.Marshal(struct {
		Error openAIError `json:"error"`
	}{openAIError{e.Message, e.Type, nullable(e.Param), nullable(e.Code)}})
	return b
}
