package openai

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"weak"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/chattemplate"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/textmodel"
	"github.com/inferd/inferd/repo/tokenizer"
)

// generator is what the chat and completion routes keep per loaded copy
// of a text-generation model: its chat template, compiled once, and a
// tokenizer that counts usage without truncating.
type generator struct {
	tpl     *chattemplate.Template
	tplErr  error
	counter *tokenizer.Tokenizer // nil: no tokenizer.json
}

// generators caches a generator per description; descriptions are per
// loaded copy (see descriptions), so a reload compiles the template again.
// Entries are keyed weakly and pruned once their description is gone.
type generators struct {
	mu sync.Mutex
	m  map[weak.Pointer[textmodel.Model]]*genEntry
}

type genEntry struct {
	once sync.Once
	g    generator
}

func (gs *generators) of(desc *textmodel.Model) *generator {
	key := weak.Make(desc)
	gs.mu.Lock()
	if gs.m == nil {
		gs.m = map[weak.Pointer[textmodel.Model]]*genEntry{}
	}
	e := gs.m[key]
	if e == nil {
		for k := range gs.m {
			if k.Value() == nil {
				delete(gs.m, k)
			}
		}
		e = &genEntry{}
		gs.m[key] = e
	}
	gs.mu.Unlock()
	e.once.Do(func() { e.g = newGenerator(desc) })
	return &e.g
}

func newGenerator(desc *textmodel.Model) generator {
	var g generator
	if desc.Tokenizer != nil {
		// Usage counts every token, whatever the file's truncation says.
		g.counter, _ = desc.Tokenizer.WithTruncation(nil)
	}
	src, err := chattemplate.Source(desc.ChatTemplateFile, desc.TokenizerConfig.ChatTemplate)
	if err != nil {
		g.tplErr = err
		return g
	}
	special := map[string]any{}
	if s := desc.TokenizerConfig.BOS(); s != "" {
		special["bos_token"] = s
	}
	if s := desc.TokenizerConfig.EOS(); s != "" {
		special["eos_token"] = s
	}
	g.tpl, g.tplErr = chattemplate.Parse(src, special, chattemplate.Config{})
	return g
}

// count is the number of tokens in text, -1 without a tokenizer.
// addSpecial adds the post-processor's tokens: a completion's prompt is
// encoded with them; a chat prompt holds its template's own (vLLM encodes
// it with add_special_tokens=False), and generated text has none.
func (g *generator) count(text string, addSpecial bool) int {
	if g.counter == nil {
		return -1
	}
	enc, err := g.counter.Encode(text, addSpecial)
	if err != nil {
		return -1
	}
	return len(enc.IDs)
}

// genRequest is one generation as the routes hand it to the model.
type genRequest struct {
	prompt string
	stream bool
	// echo keeps the prompt in the output (exclude_input_in_output false).
	echo bool
	// sampling is the sampling_parameters JSON, nil when the request set none.
	sampling []byte
}

// Inputs the server fills when the model declares them, as Triton's
// OpenAI frontend fills them for the vLLM backend
// (triton-inference-server/server python/openai/openai_frontend/engine/utils/triton.py,
// _create_vllm_inference_request).
const (
	inText          = "text_input"
	inStream        = "stream"
	inSampling      = "sampling_parameters"
	inExclude       = "exclude_input_in_output"
	inReturnInput   = "return_num_input_tokens"
	inReturnOutput  = "return_num_output_tokens"
	outText         = "text_output"
	outInputTokens  = "num_input_tokens"
	outOutputTokens = "num_output_tokens"
)

// coreRequest builds the model's request against its configuration: every
// input holds one element, shaped by its dims (variable ones 1) after a
// batch dimension of 1 when the model batches.
func (gr *genRequest) coreRequest(cfg *modelconfig.ModelConfig) (*core.InferRequest, error) {
	req := &core.InferRequest{ModelVersion: core.LatestVersion}
	for _, in := range cfg.GetInput() {
		var data []byte
		switch in.GetName() {
		case inText:
			data = core.AppendBytesElement(nil, []byte(gr.prompt))
		case inStream:
			// Only a decoupled model can stream (the vLLM backend refuses
			// stream otherwise); another's one response is streamed as one
			// piece.
			data = boolData(gr.stream && cfg.GetModelTransactionPolicy().GetDecoupled())
		case inExclude:
			data = boolData(!gr.echo)
		case inReturnInput, inReturnOutput:
			data = boolData(true)
		case inSampling:
			if gr.sampling == nil {
				continue
			}
			data = core.AppendBytesElement(nil, gr.sampling)
		default:
			if in.GetOptional() {
				continue
			}
			return nil, &Error{Status: 400, Type: invalidRequest, Param: "model",
				Message: fmt.Sprintf("model '%s' needs input '%s', which these routes do not fill", cfg.GetName(), in.GetName())}
		}
		shape, err := oneElementShape(in, cfg.GetMaxBatchSize() > 0)
		if err != nil {
			return nil, err
		}
		req.Inputs = append(req.Inputs, &core.Tensor{Name: in.GetName(), DataType: core.DataType(in.GetDataType()), Shape: shape, Data: data})
	}
	return req, nil
}

func boolData(b bool) []byte {
	if b {
		return []byte{1}
	}
	return []byte{0}
}

func oneElementShape(in *modelconfig.ModelInput, batching bool) ([]int64, error) {
	shape := make([]int64, 0, len(in.GetDims())+1)
	if batching {
		shape = append(shape, 1)
	}
	for _, d := range in.GetDims() {
		switch {
		case d < 0:
			d = 1
		case d != 1:
			return nil, fmt.Errorf("model input '%s' has dims %v: the generation routes send it one element", in.GetName(), in.GetDims())
		}
		shape = append(shape, d)
	}
	return shape, nil
}

// genOutput is what one model response carries.
type genOutput struct {
	text string
	// inputTokens and outputTokens are the model's own counts, -1 when it
	// reports none (vLLM's backend sends num_input_tokens with every
	// response and num_output_tokens per response).
	inputTokens, outputTokens int
}

var errNoText = errors.New("the model's response has no text_output")

// readOutput reads a response's text_output (its elements joined) and
// token counts.
func readOutput(resp *core.InferResponse) (genOutput, error) {
	out := genOutput{inputTokens: -1, outputTokens: -1}
	found := false
	for _, t := range resp.Outputs {
		switch t.Name {
		case outText:
			elems, err := core.BytesElements(t.Data)
			if err != nil {
				return out, fmt.Errorf("text_output: %w", err)
			}
			var b strings.Builder
			for _, e := range elems {
				b.Write(e)
			}
			out.text, found = b.String(), true
		case outInputTokens:
			out.inputTokens = intScalar(t)
		case outOutputTokens:
			out.outputTokens = intScalar(t)
		}
	}
	if !found {
		return out, errNoText
	}
	return out, nil
}

// intScalar reads an integer tensor's first element, -1 when it has none.
func intScalar(t *core.Tensor) int {
	d := t.Data
	switch t.DataType {
	case core.TypeUint32, core.TypeInt32:
		if len(d) >= 4 {
			return int(int32(binary.LittleEndian.Uint32(d)))
		}
	case core.TypeUint64, core.TypeInt64:
		if len(d) >= 8 {
			return int(binary.LittleEndian.Uint64(d) & (1<<62 - 1))
		}
	}
	return -1
}
