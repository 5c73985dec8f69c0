// Package padbatch holds a model's opt-in to padded batching: the inputs
// whose variable last dimension the dynamic batcher may pad (and with which
// value), so that requests of different lengths share an execution, and the
// token budget that bounds one execution's rows × padded length. Triton has
// no equivalent (its dynamic batcher batches equal shapes only,
// triton-inference-server/core src/dynamic_batch_scheduler.cc); the
// parameters live in the config's free-form `parameters` map
// (docs/openai.md, "Token-budget batching").
package padbatch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/inferd/inferd/repo/modelconfig"
)

// The config parameters.
const (
	// ParamPadInputs lists the paddable inputs with their pad values:
	// "input_ids=0,attention_mask=0,token_type_ids=0".
	ParamPadInputs = "pad_inputs"
	// ParamTokenBudget bounds rows × padded length of one execution and
	// turns on length grouping.
	ParamTokenBudget = "token_budget"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("invalid padded batching parameters")

// Spec is a model's padded batching; nil when the model does not opt in.
type Spec struct {
	// Pad maps each paddable input to its pad value.
	Pad map[string]int64
	// Budget is the most rows × padded length one execution may hold;
	// 0: no budget and no length grouping (pad to the longest of a batch
	// formed as usual).
	Budget int64
}

// Pads reports whether name is paddable, and its pad value.
func (s *Spec) Pads(name string) (int64, bool) {
	if s == nil {
		return 0, false
	}
	v, ok := s.Pad[name]
	return v, ok
}

// Parse reads cfg's padded batching parameters and checks them against the
// model: nil, nil when neither is set.
func Parse(cfg *modelconfig.ModelConfig) (*Spec, error) {
	pads, hasPads := modelconfig.StringParameter(cfg, ParamPadInputs)
	budget, hasBudget := modelconfig.StringParameter(cfg, ParamTokenBudget)
	if !hasPads && !hasBudget {
		return nil, nil
	}
	name := cfg.GetName()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: model '%s': %s", ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	if !hasPads {
		return nil, fail("parameter %s needs %s (the inputs to pad, e.g. \"input_ids=0,attention_mask=0\")", ParamTokenBudget, ParamPadInputs)
	}
	if cfg.GetMaxBatchSize() <= 0 || cfg.GetDynamicBatching() == nil || cfg.GetSequenceBatching() != nil {
		return nil, fail("parameter %s needs a model with max_batch_size > 0 and dynamic_batching", ParamPadInputs)
	}
	s := &Spec{Pad: map[string]int64{}}
	if hasBudget {
		n, err := strconv.ParseInt(strings.TrimSpace(budget), 10, 64)
		if err != nil || n < 1 {
			return nil, fail("parameter %s %q: want a positive integer (rows × padded length)", ParamTokenBudget, budget)
		}
		s.Budget = n
	}
	for item := range strings.SplitSeq(pads, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		in, val, ok := strings.Cut(item, "=")
		in = strings.TrimSpace(in)
		if !ok || in == "" {
			return nil, fail("parameter %s: %q is not input=value", ParamPadInputs, item)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return nil, fail("parameter %s: pad value of '%s' %q is not an integer", ParamPadInputs, in, val)
		}
		if _, dup := s.Pad[in]; dup {
			return nil, fail("parameter %s names input '%s' twice", ParamPadInputs, in)
		}
		if err := checkInput(cfg, in, v); err != nil {
			return nil, fail("parameter %s: %v", ParamPadInputs, err)
		}
		s.Pad[in] = v
	}
	if len(s.Pad) == 0 {
		return nil, fail("parameter %s names no input", ParamPadInputs)
	}
	return s, nil
}

// checkInput checks that input in of cfg can be padded with v: it exists,
// is an integer type that holds v, has a variable last dim and is not
// ragged.
func checkInput(cfg *modelconfig.ModelConfig, in string, v int64) error {
	i := slices.IndexFunc(cfg.GetInput(), func(t *modelconfig.ModelInput) bool { return t.GetName() == in })
	if i < 0 {
		return fmt.Errorf("unknown input '%s'", in)
	}
	t := cfg.GetInput()[i]
	dims := t.GetDims()
	switch {
	case len(dims) == 0 || dims[len(dims)-1] != -1:
		return fmt.Errorf("input '%s' has dims %v: its last dim must be variable (-1)", in, dims)
	case t.GetAllowRaggedBatch():
		return fmt.Errorf("input '%s' allows ragged batches: it is concatenated flat, not padded", in)
	}
	lo, hi, ok := intRange(t.GetDataType())
	if !ok {
		return fmt.Errorf("input '%s' is %s: only integer inputs are padded", in, t.GetDataType())
	}
	if v < lo || v > hi {
		return fmt.Errorf("pad value %d does not fit input '%s' (%s)", v, in, t.GetDataType())
	}
	return nil
}

// intRange is the range of an integer data type.
func intRange(dt modelconfig.DataType) (lo, hi int64, ok bool) {
	switch dt {
	case modelconfig.DataType_TYPE_INT8:
		return -1 << 7, 1<<7 - 1, true
	case modelconfig.DataType_TYPE_INT16:
		return -1 << 15, 1<<15 - 1, true
	case modelconfig.DataType_TYPE_INT32:
		return -1 << 31, 1<<31 - 1, true
	case modelconfig.DataType_TYPE_INT64:
		return -1 << 63, 1<<63 - 1, true
	case modelconfig.DataType_TYPE_UINT8:
		return 0, 1<<8 - 1, true
	case modelconfig.DataType_TYPE_UINT16:
		return 0, 1<<16 - 1, true
	case modelconfig.DataType_TYPE_UINT32:
		return 0, 1<<32 - 1, true
	case modelconfig.DataType_TYPE_UINT64:
		return 0, 1<<63 - 1, true
	}
	return 0, 0, false
}
