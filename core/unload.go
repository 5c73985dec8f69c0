package core

import (
	"context"
	"fmt"
	"slices"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Unload unloads every version of a model, waiting for in-flight requests.
// Unknown or never-loaded models are a no-op. Ensembles that use the model
// are unloaded too, as Triton does.
func (s *Server) Unload(ctx context.Context, name string) error {
	return s.UnloadDependents(ctx, name, false)
}

// UnloadDependents is Unload with the repository API's unload_dependents:
// unloading an ensemble also unloads the composing models that were loaded
// only for ensembles and that no other loaded ensemble uses. It returns once
// the versions are closed (or ctx ends).
func (s *Server) UnloadDependents(ctx context.Context, name string, dependents bool) error {
	return s.unloadName(ctx, name, dependents, true)
}

// BeginUnload is UnloadDependents without the wait: the versions stop
// taking requests at once and close in the background when their in-flight
// requests are done, showing UNLOADING until then. It is what a model's own
// code gets (pb_utils.unload_model), whose request may be one of those in
// flight: Triton's unload does not wait for the model to be fully unloaded
// either (TRITONSERVER_ServerUnloadModel in triton-inference-server/core
// include/triton/core/tritonserver.h).
func (s *Server) BeginUnload(ctx context.Context, name string, dependents bool) error {
	return s.unloadName(ctx, name, dependents, false)
}

// unloadName unloads every model name stands for (keysFor), each with its
// tree.
func (s *Server) unloadName(ctx context.Context, name string, dependents, wait bool) error {
	for _, key := range s.keysFor(name) {
		if err := s.unloadTree(ctx, key, dependents, wait); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) unloadTree(ctx context.Context, name string, dependents, wait bool) error {
	if s.isStopping() {
		return errNotReady
	}
	cfg := s.servingConfig(name)
	if err := s.unload(ctx, name, wait); err != nil {
		return err
	}
	for _, e := range s.ensemblesUsing(name) {
		s.log.Error("unloading an ensemble whose composing model was unloaded", "ensemble", e,
			"err", fmt.Sprintf("ensemble %s contains models that are not available or ambiguous: %s", e, name))
		if err := s.unloadTree(ctx, e, false, wait); err != nil {
			return err
		}
		s.wait(name, e)
	}
	if dependents && cfg != nil && modelconfig.IsEnsemble(cfg) {
		for _, dep := range composingKeys(cfg) {
			if s.loadedForEnsembles(dep) && len(s.ensemblesUsing(dep)) == 0 {
				if err := s.unloadTree(ctx, dep, true, wait); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// markExplicit records that name was loaded for itself; it creates no
// state for an unknown name.
func (s *Server) markExplicit(name string) {
	s.mu.Lock()
	defer s.unlock()
	if m := s.models[name]; m != nil {
		m.explicit = true
	}
}

// wait records that ensemble e went down for want of model m.
func (s *Server) wait(m, e string) {
	s.mu.Lock()
	defer s.unlock()
	if s.waiting == nil {
		s.waiting = map[string][]string{}
	}
	if !slices.Contains(s.waiting[m], e) {
		s.waiting[m] = append(s.waiting[m], e)
	}
}

// takeWaiting returns, and forgets, the ensembles waiting for model m.
func (s *Server) takeWaiting(m string) []string {
	s.mu.Lock()
	defer s.unlock()
	w := s.waiting[m]
	delete(s.waiting, m)
	return w
}

// servingConfig is the configuration of name's serving versions, or nil.
func (s *Server) servingConfig(name string) *modelconfig.ModelConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m := s.models[name]; m != nil {
		for _, slot := range m.versions {
			if slot.mv != nil {
				return slot.mv.Config
			}
		}
	}
	return nil
}

// ensemblesUsing lists the loaded ensembles with a step on model name.
func (s *Server) ensemblesUsing(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for e, m := range s.models {
		for _, slot := range m.versions {
			if slot.mv != nil && modelconfig.IsEnsemble(slot.mv.Config) && slices.Contains(composingKeys(slot.mv.Config), name) {
				out = append(out, e)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// loadedForEnsembles reports whether name was loaded only as a composing
// model, never asked for itself.
func (s *Server) loadedForEnsembles(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.models[name]
	return m != nil && !m.explicit
}

// unload takes name's versions out of service and closes them in the
// background; with wait it returns once they are closed, and those an
// earlier unload is still closing (or ctx ends).
func (s *Server) unload(ctx context.Context, name string, wait bool) error {
	// The model's lock covers only the state change: a later load or
	// unload of the model need not wait for the old versions' in-flight
	// requests, which may even include the caller's own (a model that
	// unloads itself).
	unlock := s.lockModel(name)
	// Versions that served show UNLOADING until their in-flight requests
	// are done, then UNAVAILABLE "unloaded".
	var retire []*ModelVersion
	var draining []*versionSlot
	var earlier []<-chan struct{}
	done := make(chan struct{})
	s.mu.Lock()
	m := s.models[name]
	if m != nil {
		for _, slot := range m.versions {
			switch {
			case slot.mv != nil:
				retire = append(retire, slot.mv)
				draining = append(draining, slot)
				slot.mv = nil
				slot.state, slot.reason, slot.closed = StateUnloading, "", done
			case slot.state == StateUnloading && slot.closed != nil:
				earlier = append(earlier, slot.closed) // its unload settles it
			default:
				slot.state, slot.reason = StateUnavailable, "unloaded"
			}
		}
		m.reason = ""
		m.loaded, m.attempted = "", ""
		m.explicit = false
		s.deregisterLocked(name)
	}
	s.unlock()
	unlock()
	// The versions show UNAVAILABLE "unloaded" only once closed: until
	// then they stay UNLOADING, so nobody takes a model that still holds
	// its resources for unloaded. A load meanwhile replaces their slots
	// (markLoading), which settle then leaves alone.
	go func() {
		for _, mv := range retire {
			// An unload does not wait for live sequences, as Triton's:
			// neither on this copy nor on those it replaced.
			handovers := mv.stopHandovers()
			mv.close() // waits for the version's in-flight requests
			for _, ch := range handovers {
				<-ch
			}
		}
		s.mu.Lock()
		for _, slot := range draining {
			if slot.mv == nil && slot.state == StateUnloading {
				slot.state, slot.reason = StateUnavailable, "unloaded"
			}
		}
		s.unlock()
		close(done)
	}()
	if !wait {
		return nil
	}
	for _, ch := range append(earlier, done) {
		select {
		case <-ch:
		case <-ctx.Done():
			return Errorf(CodeInternal, "failed to unload '%s': %v", name, ctx.Err())
		}
	}
	return nil
}
