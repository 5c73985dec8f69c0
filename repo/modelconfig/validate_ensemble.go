package modelconfig

import (
	"fmt"
	"slices"
	"sort"
)

// ensembleTensor is a node of an ensemble's data-flow graph.
type ensembleTensor struct {
	name     string
	isOutput bool // produced by some step's output_map
	ready    bool
	prev     []*ensembleTensor // tensors the producing step consumes
	next     []*ensembleTensor // tensors produced from this one
}

// validateEnsembleScheduling is Triton's static ensemble check
// (ValidateEnsembleSchedulingConfig in triton-inference-server/core
// src/model_config_utils.cc): forbidden fields, complete steps, and a data flow in which every
// output is reachable from the inputs and every tensor is used. Checks
// against the composing models happen when those are loaded. Maps are
// walked in sorted key order so the reported error is deterministic.
func validateEnsembleScheduling(cfg *ModelConfig) error {
	name := cfg.GetName()
	if cfg.GetPlatform() != PlatformEnsemble {
		return fmt.Errorf("ensemble scheduling cannot be set for model '%s' whose platform is not %s",
			name, PlatformEnsemble)
	}
	if len(cfg.GetInstanceGroup()) != 0 {
		return fmt.Errorf("instance group should not be specified for ensemble '%s'", name)
	}
	if cfg.GetOptimization() != nil {
		return fmt.Errorf("optimization should not be specified for ensemble '%s'", name)
	}
	if len(cfg.GetModelWarmup()) != 0 {
		return fmt.Errorf("model_warmup can not be specified for ensemble '%s'", name)
	}
	if len(cfg.GetEnsembleScheduling().GetStep()) == 0 {
		return fmt.Errorf("must specify 'step' for ensemble '%s'", name)
	}

	tensors, err := buildEnsembleGraph(cfg)
	if err != nil {
		return err
	}

	// Propagate readiness from the ensemble inputs.
	var queue []*ensembleTensor
	for _, in := range cfg.GetInput() {
		t, ok := tensors[in.GetName()]
		if !ok {
			// The unbalanced quote is Triton's.
			return fmt.Errorf("ensemble input '%s' for ensemble %s' is not used", in.GetName(), name)
		}
		t.ready = true
		queue = append(queue, t)
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, n := range t.next {
			if n.ready {
				continue
			}
			n.ready = !slices.ContainsFunc(n.prev, func(p *ensembleTensor) bool { return !p.ready })
			if n.ready {
				queue = append(queue, n)
			}
		}
	}

	outputs := make(map[string]bool)
	for _, out := range cfg.GetOutput() {
		t, ok := tensors[out.GetName()]
		if !ok {
			return fmt.Errorf("ensemble output '%s' for ensemble %s' is not used", out.GetName(), name)
		}
		if !t.ready {
			return unwrittenOutputError(t, name)
		}
		outputs[t.name] = true
	}

	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if outputs[n] {
			continue // outputs need no consumer
		}
		if t := tensors[n]; !t.ready || len(t.next) == 0 {
			return fmt.Errorf("ensemble tensor '%s' is unused in ensemble '%s'", n, name)
		}
	}
	return nil
}

// unwrittenOutputError names, when it can, the first not-ready tensor up
// the chain that keeps output t from being produced.
func unwrittenOutputError(t *ensembleTensor, ensemble string) error {
	msg := fmt.Sprintf("output '%s' for ensemble '%s' is not written", t.name, ensemble)
	last := t
	seen := make(map[string]bool)
	prev := t.prev
	for len(prev) > 0 {
		nodes := prev
		prev = nil
		for _, p := range nodes {
			if !p.ready && !seen[p.name] {
				seen[p.name] = true
				last = p
				prev = p.prev
				break
			}
		}
	}
	if last != t {
		msg += fmt.Sprintf(": at least one of its depending tensors, '%s', is not connected", last.name)
	}
	return fmt.Errorf("%s", msg)
}

func buildEnsembleGraph(cfg *ModelConfig) (map[string]*ensembleTensor, error) {
	name := cfg.GetName()
	tensors := make(map[string]*ensembleTensor)
	get := func(n string) *ensembleTensor {
		t, ok := tensors[n]
		if !ok {
			t = &ensembleTensor{name: n}
			tensors[n] = t
		}
		return t
	}

	for idx, step := range cfg.GetEnsembleScheduling().GetStep() {
		if step.GetModelName() == "" {
			return nil, fmt.Errorf("must specify 'model_name' in step %d of ensemble '%s'", idx, name)
		}
		if len(step.GetInputMap()) == 0 {
			return nil, fmt.Errorf("must specify 'input_map' in step %d of ensemble '%s'", idx, name)
		}
		if len(step.GetOutputMap()) == 0 {
			return nil, fmt.Errorf("must specify 'output_map' in step %d of ensemble '%s'", idx, name)
		}

		var produced []*ensembleTensor
		for _, key := range sortedKeys(step.GetOutputMap()) {
			t := get(step.GetOutputMap()[key])
			if t.isOutput {
				return nil, fmt.Errorf("ensemble tensor '%s' can appear in an output map only once for ensemble '%s' step %d",
					t.name, name, idx)
			}
			t.isOutput = true
			produced = append(produced, t)
		}

		// A Go map cannot hold the same composing-model input twice, so
		// Triton's "mapped to multiple ensemble tensors" error cannot arise
		// here: the text parser already keeps only the last entry.
		for _, key := range sortedKeys(step.GetInputMap()) {
			t := get(step.GetInputMap()[key])
			for _, out := range produced {
				out.prev = append(out.prev, t)
				t.next = append(t.next, out)
			}
		}
	}
	return tensors, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
