package core

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// ensembleChainKey carries, through the loads an ensemble triggers, the
// ensembles being loaded above it, to refuse circular dependencies.
type ensembleChainKey struct{}

// loadComposing loads every composing model of ensemble cfg (a model that
// is loaded and unchanged is a no-op) and then checks the ensemble against
// their configurations (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc). It runs without the
// ensemble's own lock, so two ensembles loading each other fail with a
// cycle instead of waiting on each other.
//
// It returns the labels the ensemble's outputs inherit: an output without
// a label file of its own takes those of the composing output mapped to
// it, as in triton-inference-server/core
// src/model_repository_manager/model_lifecycle.cc.
//
// With namespacing (namespace is the ensemble's), each step runs the model
// of its name in the ensemble's own namespace, else the one model of that
// name anywhere, as Triton resolves steps (triton-inference-server/core
// src/model_repository_manager/model_repository_manager.cc,
// ConnectDependencyGraph); the step's model_namespace records it.
func (s *Server) loadComposing(ctx context.Context, namespace string, cfg *modelconfig.ModelConfig) (map[string][]string, error) {
	name := repo.Key(namespace, cfg.GetName())
	chain, _ := ctx.Value(ensembleChainKey{}).([]string)
	chain = append(slices.Clone(chain), name)
	ctx = context.WithValue(ctx, ensembleChainKey{}, chain)
	var missing []string
	loadErrs := map[string]error{}
	for _, dep := range composingModels(cfg) {
		keys, own := s.stepKeys(ctx, namespace, dep)
		for _, key := range keys {
			if slices.Contains(chain, key) {
				return nil, Errorf(CodeInvalidArg, "circular dependency between ensembles: %s -> %s", strings.Join(chain, " -> "), key)
			}
		}
		if err := s.loadStep(ctx, namespace, dep, own); err != nil {
			s.log.Error("failed to load a composing model", "ensemble", name, "model", dep, "err", err)
			if s.inRepository(ctx, dep) {
				loadErrs[dep] = err // there is a folder, and it failed
			}
		}
	}
	configs := map[string]*modelconfig.ModelConfig{}
	inherited := map[string][]string{}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		v := st.GetModelVersion()
		if v < 0 {
			v = LatestVersion
		}
		key, err := s.stepTarget(namespace, st.GetModelName())
		if err != nil {
			missing = append(missing, st.GetModelName())
			continue
		}
		st.ModelNamespace = s.idOf(key).namespace
		mv, release, err := s.acquireKey(key, v)
		if err != nil {
			missing = append(missing, st.GetModelName())
			continue
		}
		configs[st.GetModelName()] = mv.Config
		for from, to := range st.GetOutputMap() {
			if l := mv.Labels[from]; l != nil {
				inherited[to] = l
			}
		}
		release()
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		// Triton's texts: a model that tried to load and failed, else one
		// that is not there.
		if err := loadErrs[missing[0]]; err != nil {
			return nil, Errorf(CodeInvalidArg, "ensemble '%s' depends on '%s' which has no loaded version. Model '%s' loading failed with error: %s",
				name, missing[0], missing[0], strings.TrimSpace(err.Error()))
		}
		return nil, Errorf(CodeInvalidArg, "ensemble %s contains models that are not available or ambiguous: %s", name, strings.Join(missing, ", "))
	}
	return inherited, validateComposing(cfg, configs)
}

// composingKeys lists the registry keys of the models an ensemble's steps
// run, sorted.
func composingKeys(cfg *modelconfig.ModelConfig) []string {
	var keys []string
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		keys = append(keys, stepKey(st.GetModelNamespace(), st.GetModelName()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// composingModels lists the models an ensemble's steps name, sorted.
func composingModels(cfg *modelconfig.ModelConfig) []string {
	var names []string
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		names = append(names, st.GetModelName())
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ensembleUse is one place an ensemble tensor appears: an ensemble input
// or output, or a composing model's input or output.
type ensembleUse struct {
	model    string // the model the use is inferred from (the ensemble for its own inputs and outputs)
	dtype    modelconfig.DataType
	dims     []int64 // without the batch dimension
	batching bool
}

// validateComposing checks ensemble cfg against its composing models'
// configurations (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc): every mapped name exists,
// every required input is mapped, every tensor keeps one datatype and a
// compatible shape, and no composing model batches less than the ensemble.
func validateComposing(cfg *modelconfig.ModelConfig, configs map[string]*modelconfig.ModelConfig) error {
	name := cfg.GetName()
	uses := map[string][]ensembleUse{}
	ensBatching := cfg.GetMaxBatchSize() > 0
	for _, in := range cfg.GetInput() {
		uses[in.GetName()] = append(uses[in.GetName()], ensembleUse{name, in.GetDataType(), ioDims(in.GetDims(), in.GetReshape()), ensBatching})
	}
	for _, out := range cfg.GetOutput() {
		uses[out.GetName()] = append(uses[out.GetName()], ensembleUse{name, out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), ensBatching})
	}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		m := configs[st.GetModelName()]
		if mb := m.GetMaxBatchSize(); mb != 0 && mb < cfg.GetMaxBatchSize() {
			return Errorf(CodeInvalidArg, "ensemble %s allows maximum batch size %d, but it contains model %s which only allows maximum batch size to be %d",
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
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapping to non-existing input %s in model %s", name, st.GetInputMap()[key], key, m.GetName())
			}
			t := st.GetInputMap()[key]
			uses[t] = append(uses[t], ensembleUse{m.GetName(), in.GetDataType(), in.GetDims(), batching})
		}
		for _, in := range m.GetInput() {
			if _, ok := st.GetInputMap()[in.GetName()]; !ok && !in.GetOptional() {
				return Errorf(CodeInvalidArg, "in ensemble %s, input %s in model %s is not mapped to any ensemble tensors", name, in.GetName(), m.GetName())
			}
		}
		outputs := map[string]*modelconfig.ModelOutput{}
		for _, out := range m.GetOutput() {
			outputs[out.GetName()] = out
		}
		for _, key := range slices.Sorted(maps.Keys(st.GetOutputMap())) {
			out := outputs[key]
			if out == nil {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapped from non-existing output %s in model %s", name, st.GetOutputMap()[key], key, m.GetName())
			}
			t := st.GetOutputMap()[key]
			uses[t] = append(uses[t], ensembleUse{m.GetName(), out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), batching})
		}
	}
	labels, err := ensembleLabels(cfg, func(model string) bool { return configs[model].GetModelTransactionPolicy().GetDecoupled() })
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
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is inferred from model %s while %s is inferred from model %s",
					name, t, first.dtype, first.model, u.dtype, u.model)
			}
			if !dimsCompatible(first, u) {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent shape: %s is inferred from model %s while %s is inferred from model %s",
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

func fullShape(u ensembleUse) []int64 {
	if u.batching {
		return append([]int64{-1}, u.dims...)
	}
	return u.dims
}

// dimsCompatible compares two uses with -1 as a wildcard, either dims to
// dims or full shape to full shape (so a non-batching model's [-1, d] can
// feed a batching model's [d]).
func dimsCompatible(a, b ensembleUse) bool {
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
