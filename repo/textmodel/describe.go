package textmodel

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core/padbatch"
	mc "github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/tokenizer"
)

// Describe reads the text-model files of the model folder dir and
// classifies the model whose configuration is cfg. An error means a file
// or parameter is present but unusable; a model that simply is not a text
// model is Kind None with its Reason.
func Describe(dir string, cfg *mc.ModelConfig) (*Model, error) {
	f, err := readFiles(dir)
	if err != nil {
		return nil, err
	}
	m := &Model{
		Tokenizer: f.tok, HF: f.hf, TokenizerConfig: f.tc, ChatTemplateFile: f.template,
		Pooling: f.pooling, MaxBatch: int(cfg.GetMaxBatchSize()), SeqLen: -1, Hidden: -1,
	}
	if m.Pooling == "" {
		m.Pooling = Mean
	}
	params := cfg.GetParameters()
	param := func(k string) string { return strings.TrimSpace(params[k].GetStringValue()) }
	if p := param(ParamPooling); p != "" {
		if m.Pooling, err = ParsePooling(p); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", ParamPooling, err)
		}
	}
	forced := param(ParamKind)
	switch forced {
	case "", "embedding", "reranker", "generator":
	case "none":
		m.Kind, m.Reason = None, "parameter "+ParamKind+" is none"
		return m, nil
	default:
		return nil, fmt.Errorf("%w: parameter %s %q (want embedding, reranker, generator or none)", ErrInvalid, ParamKind, forced)
	}
	m.Kind, m.Reason = classify(m, cfg, forced, param(ParamOutput))
	if err := m.setMaxLength(f, param(ParamMaxLength)); err != nil {
		return nil, err
	}
	if spec, err := padbatch.Parse(cfg); err == nil && m.InputIDs != "" {
		_, m.PaddedBatch = spec.Pads(m.InputIDs) // an error is the load's to report
	}
	m.PadID = padID(f.tok)
	m.PadMultiple = 1
	if p := f.tok; p != nil && p.Padding() != nil && p.Padding().PadToMultipleOf > 1 {
		m.PadMultiple = p.Padding().PadToMultipleOf
	}
	if p := param(ParamPadding); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 1<<16 {
			return nil, fmt.Errorf("%w: parameter %s %q (want a positive integer)", ErrInvalid, ParamPadding, p)
		}
		m.PadMultiple = n
	}
	return m, nil
}

// setMaxLength picks the row bound: the max_length parameter, else
// sentence_bert_config.json's max_seq_length (TEI reads it first), else
// tokenizer.json's truncation, else tokenizer_config.json's
// model_max_length, else config.json's max_position_embeddings; a fixed
// row length bounds it too.
func (m *Model) setMaxLength(f *files, param string) error {
	if param != "" {
		n, err := strconv.Atoi(param)
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: parameter %s %q (want a positive integer)", ErrInvalid, ParamMaxLength, param)
		}
		m.MaxLength = n
	}
	for _, n := range []int{f.sbertMax, tokMax(m), f.tc.maxLength(), f.hf.MaxPositionEmbeddings} {
		if m.MaxLength == 0 && n > 0 {
			m.MaxLength = n
		}
	}
	if m.SeqLen > 0 && (m.MaxLength == 0 || int64(m.MaxLength) > m.SeqLen) {
		m.MaxLength = int(m.SeqLen)
	}
	return nil
}

// classify returns the model's kind and, for None or a forced kind, why.
func classify(m *Model, cfg *mc.ModelConfig, forced, output string) (Kind, string) {
	ins, outs := cfg.GetInput(), cfg.GetOutput()
	if in, out := findInput(ins, "text_input"), findOutput(outs, "text_output"); forced == "generator" || forced == "" && in != nil && out != nil {
		if in == nil || out == nil || in.GetDataType() != mc.DataType_TYPE_STRING || out.GetDataType() != mc.DataType_TYPE_STRING {
			return None, "a generator needs BYTES text_input and text_output"
		}
		m.TextInput, m.Output = "text_input", "text_output"
		m.Generation = Generation{
			Stream:               findInput(ins, "stream") != nil,
			SamplingParameters:   findInput(ins, "sampling_parameters") != nil,
			ExcludeInputInOutput: findInput(ins, "exclude_input_in_output") != nil,
			Decoupled:            cfg.GetModelTransactionPolicy().GetDecoupled(),
		}
		return Generator, ""
	}
	if cfg.GetMaxBatchSize() <= 0 {
		return None, "max_batch_size is 0: the encoder routes send rows along the batch dimension"
	}
	out, why := pickOutput(outs, output)
	if out == nil {
		return None, why
	}
	m.Output = out.GetName()
	dims := out.GetDims()
	if len(ins) == 1 && ins[0].GetDataType() == mc.DataType_TYPE_STRING {
		return classifyText(m, ins[0], dims, forced)
	}
	if why := m.tokenInputs(ins); why != "" {
		return None, why
	}
	if m.Tokenizer == nil {
		return None, "token inputs but no tokenizer.json beside config.pbtxt"
	}
	switch {
	case len(dims) == 1 && dims[0] == 1 && (forced == "reranker" || forced == "" && m.HF.Classifier() && m.HF.Labels() <= 1):
		m.Hidden = 1
		return Reranker, ""
	case forced == "reranker":
		return None, fmt.Sprintf("parameter %s is reranker but output %s has dims %v, not [1]", ParamKind, m.Output, dims)
	case forced == "" && m.HF.Classifier():
		return None, fmt.Sprintf("config.json names %v with %d labels: a classifier, not an encoder", m.HF.Architectures, m.HF.Labels())
	case len(dims) == 1:
		m.Hidden = dims[0]
	case len(dims) == 2 && (dims[0] == -1 || dims[0] == m.SeqLen):
		m.Hidden, m.OutputTokens = dims[1], true
	default:
		return None, fmt.Sprintf("output %s has dims %v: want [H] (pooled) or [-1, H] (token embeddings) per row", m.Output, dims)
	}
	return EmbeddingTokens, ""
}

// classifyText classifies a model with one BYTES input.
func classifyText(m *Model, in *mc.ModelInput, dims []int64, forced string) (Kind, string) {
	if d := in.GetDims(); len(d) != 1 || d[0] != 1 && d[0] != -1 {
		return None, fmt.Sprintf("BYTES input %s has dims %v: want [1] per row", in.GetName(), d)
	}
	if forced == "reranker" {
		return None, "a reranker needs token inputs (input_ids)"
	}
	if len(dims) != 1 {
		return None, fmt.Sprintf("output %s has dims %v: want [H] per row", m.Output, dims)
	}
	m.TextInput, m.Hidden = in.GetName(), dims[0]
	return EmbeddingText, ""
}

// pickOutput is the output named by the embedding_output parameter, else
// the only output, which must be FP32.
func pickOutput(outs []*mc.ModelOutput, name string) (*mc.ModelOutput, string) {
	var out *mc.ModelOutput
	switch {
	case name != "":
		if out = findOutput(outs, name); out == nil {
			return nil, fmt.Sprintf("parameter %s names %q, which is not an output", ParamOutput, name)
		}
	case len(outs) == 1:
		out = outs[0]
	default:
		return nil, fmt.Sprintf("%d outputs: name the one to read with parameter %s", len(outs), ParamOutput)
	}
	if out.GetDataType() != mc.DataType_TYPE_FP32 {
		return nil, fmt.Sprintf("output %s is %s, not TYPE_FP32", out.GetName(), out.GetDataType())
	}
	return out, ""
}

// tokenInputs checks and records input_ids, attention_mask and
// token_type_ids; "" when they fit.
func (m *Model) tokenInputs(ins []*mc.ModelInput) string {
	ids := findInput(ins, "input_ids")
	if ids == nil {
		return "no input_ids input (and not one BYTES input)"
	}
	m.IDType = ids.GetDataType()
	if m.IDType != mc.DataType_TYPE_INT64 && m.IDType != mc.DataType_TYPE_INT32 {
		return fmt.Sprintf("input_ids is %s: want TYPE_INT64 or TYPE_INT32", m.IDType)
	}
	d := ids.GetDims()
	if len(d) != 1 || d[0] == 0 || d[0] < -1 {
		return fmt.Sprintf("input_ids has dims %v: want [-1] (or a fixed [L]) per row", d)
	}
	m.InputIDs, m.SeqLen = "input_ids", d[0]
	for _, in := range ins {
		switch in.GetName() {
		case "input_ids":
			continue
		case "attention_mask":
			m.AttentionMask = in.GetName()
		case "token_type_ids":
			m.TokenTypeIDs = in.GetName()
		default:
			if !in.GetOptional() {
				return fmt.Sprintf("input %s is neither attention_mask nor token_type_ids", in.GetName())
			}
			continue
		}
		if in.GetDataType() != m.IDType || len(in.GetDims()) != 1 || in.GetDims()[0] != m.SeqLen {
			return fmt.Sprintf("input %s must have input_ids' type %s and dims %v", in.GetName(), m.IDType, d)
		}
	}
	return ""
}

func findInput(ins []*mc.ModelInput, name string) *mc.ModelInput {
	for _, in := range ins {
		if in.GetName() == name {
			return in
		}
	}
	return nil
}

func findOutput(outs []*mc.ModelOutput, name string) *mc.ModelOutput {
	for _, o := range outs {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}

// tokMax is tokenizer.json's truncation max_length, 0 without one.
func tokMax(m *Model) int {
	if m.Tokenizer == nil {
		return 0
	}
	return m.Tokenizer.MaxLength()
}

// padID is the id rows are padded with: the tokenizer's padding section's,
// else its "[PAD]" (BERT) or "<pad>" (RoBERTa, XLM-R: 1) token's, else 0.
// The attention mask hides padding from the model; the id still matters
// to a model that embeds positions by it, as RoBERTa's do.
func padID(tok *tokenizer.Tokenizer) int64 {
	if tok == nil {
		return 0
	}
	if p := tok.Padding(); p != nil {
		return p.PadID
	}
	for _, s := range []string{"[PAD]", "<pad>"} {
		if id, ok := tok.TokenToID(s); ok {
			return id
		}
	}
	return 0
}
