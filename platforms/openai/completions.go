package openai

import (
	"net/http"

	"github.com/inferd/inferd/repo/textmodel"
)

// completions is POST /v1/completions: the prompt as it is (no template)
// into text_input, the answer in OpenAI's text_completion, or streamed as
// text_completion events.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	var req completionRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	sp, maxTokens, err := req.check()
	if err != nil {
		return err
	}
	prompt, err := req.prompt()
	if err != nil {
		return err
	}
	t, err := s.resolve(req.Model, textmodel.Generator)
	if err != nil {
		return err
	}
	g := newGeneration(t, s.gens.of(t.desc), false)
	g.req = genRequest{prompt: prompt, stream: req.Stream, echo: req.Echo, sampling: sp}
	g.maxTokens = maxTokens
	g.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	release := s.api.Work() // counting is the call's decoding (see chatCompletions)
	err = g.checkLength("prompt")
	release()
	if err != nil {
		return err
	}
	if req.Stream {
		s.stream(w, r, g)
		return nil
	}
	return s.complete(w, r, g)
}
