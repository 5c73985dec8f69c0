package core

import (
	"context"
	"slices"
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
	if s.opts.Ensembles == nil {
		return nil, errNoEnsembles
	}
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
	return inherited, s.opts.Ensembles.Check(cfg, configs)
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

// Sequenced reports whether mv's requests take part in sequences: mv has
// sequence batching, or is an ensemble with a step (at any depth) that
// has. A caller that must keep a sequence's requests in order (a gRPC
// stream) hands over the next one once InferRequest.Queued says the last
// is queued.
func (mv *ModelVersion) Sequenced() bool {
	if mv.Config.GetSequenceBatching() != nil {
		return true
	}
	e, ok := mv.exec.(external)
	if !ok {
		return false
	}
	sq, ok := e.s.(interface{ Sequenced() bool })
	return ok && sq.Sequenced()
}

// sequenced reports whether the serving model name takes part in
// sequences; depth bounds the walk through nested ensembles.
func (s *Server) sequenced(name string, depth int) bool {
	cfg := s.servingConfig(name)
	if cfg == nil || depth > 16 {
		return false
	}
	if cfg.GetSequenceBatching() != nil {
		return true
	}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		if s.sequenced(stepKey(st.GetModelNamespace(), st.GetModelName()), depth+1) {
			return true
		}
	}
	return false
}
