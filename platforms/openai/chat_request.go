package openai

import (
	"bytes"
	"encoding/json"
	"math"
)

// genParams are the request fields the chat and completion routes share
// (openai/openai-python types/chat/completion_create_params.py and
// types/completion_create_params.py).
type genParams struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	N                   *int64          `json:"n"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// maxStops is OpenAI's bound on stop sequences ("Up to 4 sequences").
const maxStops = 4

// sampling is what the vLLM backend reads from sampling_parameters
// (triton-inference-server/vllm_backend src/model.py builds vLLM's
// SamplingParams from this JSON object; the keys are SamplingParams').
type sampling struct {
	MaxTokens   *int64   `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
}

// check validates the shared fields and returns the sampling parameters
// (nil when the request sets none) and max_tokens (0: none).
func (p *genParams) check() (sp []byte, maxTokens int64, err error) {
	if p.Model == "" {
		return nil, 0, invalid("model", "you must provide a model parameter")
	}
	if p.N != nil && *p.N != 1 {
		return nil, 0, invalid("n", "n must be 1: this server returns one choice")
	}
	if p.StreamOptions != nil && !p.Stream {
		return nil, 0, invalid("stream_options", "stream_options is only allowed when stream is true")
	}
	s := sampling{MaxTokens: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, Seed: p.Seed}
	if p.MaxCompletionTokens != nil {
		s.MaxTokens = p.MaxCompletionTokens
	}
	switch {
	case s.MaxTokens != nil && *s.MaxTokens < 1:
		return nil, 0, invalid(maxTokensParam(p), "%s must be at least 1, got %d", maxTokensParam(p), *s.MaxTokens)
	case s.Temperature != nil && !(*s.Temperature >= 0 && *s.Temperature <= 2):
		return nil, 0, invalid("temperature", "temperature must be between 0 and 2, got %v", *s.Temperature)
	case s.TopP != nil && !(*s.TopP > 0 && *s.TopP <= 1):
		return nil, 0, invalid("top_p", "top_p must be in (0, 1], got %v", *s.TopP)
	}
	if s.Stop, err = stops(p.Stop); err != nil {
		return nil, 0, err
	}
	if s.MaxTokens != nil {
		maxTokens = *s.MaxTokens
	}
	if s.MaxTokens == nil && s.Temperature == nil && s.TopP == nil && s.Seed == nil && s.Stop == nil {
		return nil, maxTokens, nil
	}
	sp, err = json.Marshal(s)
	return sp, maxTokens, err
}

func maxTokensParam(p *genParams) string {
	if p.MaxCompletionTokens != nil {
		return "max_completion_tokens"
	}
	return "max_tokens"
}

// stops reads stop: null, a string, or an array of up to maxStops strings.
func stops(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "stop must be a string or an array of strings")
	}
	if len(list) > maxStops {
		return nil, invalid("stop", "stop takes at most %d sequences, got %d", maxStops, len(list))
	}
	return list, nil
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	genParams
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	// ChatTemplateKwargs are extra template variables, as vLLM takes them.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	genParams
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
}

// prompt reads prompt: a string, or an array holding one string (OpenAI
// takes several prompts, or token ids, for several choices; this server
// answers one choice from text).
func (c *completionRequest) prompt() (string, error) {
	raw := bytes.TrimSpace(c.Prompt)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return list[0], nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid("prompt", "you must provide a prompt")
	}
	return "", invalid("prompt", "prompt must be a string or an array of one string")
}

// finishReason is "length" when the model produced max_tokens tokens (as
// counted), "stop" otherwise.
func finishReason(maxTokens int64, completionTokens int) string {
	if maxTokens > 0 && completionTokens >= 0 && int64(completionTokens) >= maxTokens {
		return "length"
	}
	return "stop"
}

// usage is OpenAI's CompletionUsage.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// newUsage is the usage when both counts are known, nil otherwise.
func newUsage(prompt, completion int) *usage {
	if prompt < 0 || completion < 0 || prompt > math.MaxInt32 || completion > math.MaxInt32 {
		return nil
	}
	return &usage{prompt, completion, prompt + completion}
}
