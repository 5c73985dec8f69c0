package ensemble

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// labeling is the decoupled origin of every ensemble tensor.
type labeling struct {
	tensors   map[string]int
	decoupled bool // some step's model is decoupled: the ensemble is
}

// labelsOf follows the data flow from the ensemble's inputs: a
// decoupled step's outputs get a new label, another step's outputs the
// label of its inputs. A step may not read tensors of two decoupled
// origins, nor may the outputs (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc).
func labelsOf(cfg *modelconfig.ModelConfig, decoupled func(model string) bool) (labeling, error) {
	name := cfg.GetName()
	l := labeling{tensors: map[string]int{}}
	for _, in := range cfg.GetInput() {
		l.tensors[in.GetName()] = 0
	}
	steps := cfg.GetEnsembleScheduling().GetStep()
	done := make([]bool, len(steps))
	for progress := true; progress; {
		progress = false
		for i, st := range steps {
			if done[i] {
				continue
			}
			label, ready := 0, true
			for _, from := range slices.Sorted(maps.Values(st.GetInputMap())) {
				t, ok := l.tensors[from]
				if !ok {
					ready = false
					break
				}
				if t != 0 && label != 0 && t != label {
					return l, core.Errorf(core.CodeInvalidArg, "in ensemble %s, step of model '%s' receives inputs originated from different decoupled models", name, st.GetModelName())
				}
				label = max(label, t)
			}
			if !ready {
				continue
			}
			if decoupled(st.GetModelName()) {
				label = i + 1
				l.decoupled = true
			}
			for _, to := range st.GetOutputMap() {
				l.tensors[to] = label
			}
			done[i], progress = true, true
		}
	}
	outLabel := 0
	for _, out := range cfg.GetOutput() {
		t := l.tensors[out.GetName()]
		if t != 0 && outLabel != 0 && t != outLabel {
			return l, core.Errorf(core.CodeInvalidArg, "in ensemble %s, the outputs originate from different decoupled models", name)
		}
		outLabel = max(outLabel, t)
	}
	return l, nil
}

// use is one place an ensemble tensor appears: an ensemble input
// or output, or a composing model's input or output.
type use struct {
	model    string // the model the use is inferred from (the ensemble for its own inputs and outputs)
	dtype    modelconfig.DataType
	dims     []int64 // without the batch dimension
	batching bool
}

// check checks ensemble cfg against its composing models'
// configurations (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc): every mapped name exists,
// every required input is mapped, every tensor keeps one datatype and a
// compatible shape, and no composing model batches less than the ensemble.
func check(cfg *modelconfig.ModelConfig, configs map[string]*modelconfig.ModelConfig) error {
	name := cfg.GetName()
	uses := map[string][]use{}
	ensBatching := cfg.GetMaxBatchSize() > 0
	for _, in := range cfg.GetInput() {
		uses[in.GetName()] = append(uses[in.GetName()], use{name, in.GetDataType(), ioDims(in.GetDims(), in.GetReshape()), ensBatching})
	}
	for _, out := range cfg.GetOutput() {
		uses[out.GetName()] = append(uses[out.GetName()], use{name, out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), ensBatching})
	}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		m := configs[st.GetModelName()]
		if mb := m.GetMaxBatchSize(); mb != 0 && mb < cfg.GetMaxBatchSize() {
			return core.Errorf(core.CodeInvalidArg, "ensemble %s allows maximum batch size %d, but it contains model %s which only allows maximum batch size to be %d",
				name, cfg.GetMaxBatchSize(), m.GetName(), mb)
		}
		batching := m.GetMaxBatchSize() > 0
		inputs := map[string]*modelconfig.ModelInput{}
		for _, in := range m.GetInput() {
			inputs[in.GetName()] = in
		}
		for _, key := range slices.Sorted(maps.Keys(st.GetInputMap())) {
			in := inputs[key]
			if in == nil {
				return core.Errorf(core.CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapping to non-existing input %s in model %s", name, st.GetInputMap()[key], key, m.GetName())
			}
			t := st.GetInputMap()[key]
			uses[t] = append(uses[t], use{m.GetName(), in.GetDataType(), in.GetDims(), batching})
		}
		for _, in := range m.GetInput() {
			if _, ok := st.GetInputMap()[in.GetName()]; !ok && !in.GetOptional() {
				return core.Errorf(core.CodeInvalidArg, "in ensemble %s, input %s in model %s is not mapped to any ensemble tensors", name, in.GetName(), m.GetName())
			}
		}
		outputs := map[string]*modelconfig.ModelOutput{}
		for _, out := range m.GetOutput() {
			outputs[out.GetName()] = out
		}
		for _, key := range slices.Sorted(maps.Keys(st.GetOutputMap())) {
			out := outputs[key]
			if out == nil {
				return core.Errorf(core.CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapped from non-existing output %s in model %s", name, st.GetOutputMap()[key], key, m.GetName())
			}
			t := st.GetOutputMap()[key]
			uses[t] = append(uses[t], use{m.GetName(), out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), batching})
		}
	}
	labels, err := labelsOf(cfg, func(model string) bool { return configs[model].GetModelTransactionPolicy().GetDecoupled() })
	if err != nil {
		return err
	}
	// As Triton, the ensemble is decoupled exactly when a step's model is,
	// whatever its config said.
	cfg.ModelTransactionPolicy = &modelconfig.ModelTransactionPolicy{Decoupled: labels.decoupled}
	for _, t := range slices.Sorted(maps.Keys(uses)) {
		first := uses[t][0]
		for _, u := range uses[t][1:] {
			if u.dtype != first.dtype {
				return core.Errorf(core.CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is inferred from model %s while %s is inferred from model %s",
					name, t, first.dtype, first.model, u.dtype, u.model)
			}
			if !dimsCompatible(first, u) {
				return core.Errorf(core.CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent shape: %s is inferred from model %s while %s is inferred from model %s",
					name, t, dimsList(fullShape(first)), first.model, dimsList(fullShape(u)), u.model)
			}
		}
	}
	return nil
}

// ioDims are the dims an input or output shows the ensemble: its reshape
// when it has one.
func ioDims(dims []int64, rs *modelconfig.ModelTensorReshape) []int64 {
	if rs != nil {
		return rs.GetShape()
	}
	return dims
}

// dimsList prints dims as Triton's DimsListToString: [-1,16].
func dimsList(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func fullShape(u use) []int64 {
	if u.batching {
		return append([]int64{-1}, u.dims...)
	}
	return u.dims
}

// dimsCompatible compares two uses with -1 as a wildcard, either dims to
// dims or full shape to full shape (so a non-batching model's [-1, d] can
// feed a batching model's [d]).
func dimsCompatible(a, b use) bool {
	match := func(x, y []int64) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != -1 && y[i] != -1 && x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return match(a.dims, b.dims) || match(fullShape(a), fullShape(b))
}
