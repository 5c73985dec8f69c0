package openai

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestGenerationOpenAIClient drives the generation routes with OpenAI's own
// Go client (github.com/openai/openai-go): its decoding of the objects,
// its SSE reader and accumulator, and its typed errors, mid-stream
// included.
func TestGenerationOpenAIClient(t *testing.T) {
	base, _ := startChat(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage("Hi 😀")}
	const want = "<<s>[system]Be terse.[user]Hi 😀[assistant]>"

	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gen_stream", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != want || resp.Choices[0].FinishReason != "stop" ||
		resp.Usage.PromptTokens != 3 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("chat completion %s", resp.RawJSON())
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gen_stream", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].Message.Role != "assistant" ||
		acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != 11 {
		t.Fatalf("accumulated stream: %+v, usage %+v", acc.Choices, acc.Usage)
	}

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "gen_stream",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 1 || comp.Choices[0].Text != "<Onc" || comp.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %s", comp.RawJSON())
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "nope", Messages: msgs})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gen_stream", Messages: msgs, N: openai.Int(3)})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Param != "n" {
		t.Fatalf("n=3: %v", err)
	}

	cs := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "gen_stream",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("FAIL_AFTER_2")}})
	n := 0
	for cs.Next() {
		n++
	}
	// The client reports a data event with "error" as an error that
	// carries the error object.
	if err := cs.Err(); n != 2 || err == nil || !strings.Contains(err.Error(), "the model broke down") {
		t.Fatalf("mid-stream failure: %d chunks, then %v; want 2 and the model's error", n, err)
	}
}
