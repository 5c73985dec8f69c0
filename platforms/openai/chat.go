package openai

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/repo/chattemplate"
	"github.com/inferd/inferd/repo/textmodel"
)

// mountGenerators adds the generation routes: OpenAI's chat completions
// and completions.
func (s *Server) mountGenerators(r chi.Router) {
	r.HandleFunc("/v1/chat/completions", s.handle(openAI, http.MethodPost, "inference", s.chatCompletions))
	r.HandleFunc("/v1/completions", s.handle(openAI, http.MethodPost, "inference", s.completions))
}

// chatCompletions is POST /v1/chat/completions: the messages rendered with
// the model's chat template (repo/chattemplate) into text_input, the
// answer in OpenAI's chat.completion, or streamed as chat.completion.chunk
// events.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	sp, maxTokens, err := req.check()
	if err != nil {
		return err
	}
	if m := bytes.TrimSpace(req.Messages); len(m) < 2 || m[0] != '[' || bytes.Equal(bytes.ReplaceAll(m, []byte(" "), nil), []byte("[]")) {
		return invalid("messages", "messages must be a non-empty array of messages")
	}
	t, err := s.resolve(req.Model, textmodel.Generator)
	if err != nil {
		return err
	}
	gen := s.gens.of(t.desc)
	if gen.tpl == nil {
		return templateError(t.name, gen.tplErr)
	}
	g := newGeneration(t, gen, true)
	g.req = genRequest{stream: req.Stream, sampling: sp}
	g.maxTokens = maxTokens
	g.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	// Rendering and counting are the call's decoding: they take a
	// --http-thread-count slot, as /infer's decoding does.
	release := s.api.Work()
	g.req.prompt, err = gen.tpl.Render(r.Context(), chattemplate.Chat{Messages: req.Messages, Tools: req.Tools,
		AddGenerationPrompt: true, Kwargs: req.ChatTemplateKwargs})
	if err == nil {
		err = g.checkLength("messages")
	}
	release()
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, chattemplate.ErrRunaway):
		// The template's own computation crossed a bound: the server's
		// fault (the model folder's), not the request's.
		return &Error{Status: http.StatusInternalServerError, Type: serverError, TEIType: "Backend",
			Message: "model `" + t.name + "`: chat template: " + err.Error()}
	case errors.Is(err, chattemplate.ErrInput) || errors.Is(err, chattemplate.ErrRender) || errors.Is(err, chattemplate.ErrLimit):
		return invalid("messages", "%v", err)
	case err != nil:
		return err
	}
	if req.Stream {
		s.stream(w, r, g)
		return nil
	}
	return s.complete(w, r, g)
}

// templateError is a model's missing or broken chat template: the first
// is the client's to fix (use /v1/completions), the second the server's.
func templateError(model string, err error) *Error {
	if errors.Is(err, chattemplate.ErrNoTemplate) {
		return invalid("model", "model `%s` has no chat template (tokenizer_config.json chat_template or chat_template.jinja beside config.pbtxt): use /v1/completions", model)
	}
	return &Error{Status: http.StatusInternalServerError, Type: serverError, TEIType: "Backend",
		Message: "model `" + model + "`: " + err.Error()}
}
