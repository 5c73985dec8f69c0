package core

import (
	"context"
	"errors"

	"github.com/inferd/inferd/repo"
)

// RegisterRepository adds a local repository root while serving, its
// folders served under the names in mapping (folder -> model name; other
// folders keep theirs). SageMaker's multi-model endpoint registers each
// artifact this way before loading it. A root already registered is
// ALREADY_EXISTS.
func (s *Server) RegisterRepository(root string, mapping map[string]string) error {
	src, err := repo.OpenMapped(root, mapping)
	if err != nil {
		return Errorf(CodeInvalidArg, "failed to register '%s': %v", root, err)
	}
	if err := s.opts.Repos.Add(src); err != nil {
		if errors.Is(err, repo.ErrAlreadyRegistered) {
			return Errorf(CodeAlreadyExists, "model repository '%s' has already been registered", root)
		}
		return Errorf(CodeInternal, "failed to register '%s': %v", root, err)
	}
	return nil
}

// UnregisterRepository removes a root added by RegisterRepository; its
// models stay loaded until unloaded. The state of its models that serve
// nothing and no other root holds is dropped: a multi-model endpoint loads
// and unloads an unbounded series of names.
func (s *Server) UnregisterRepository(root string) error {
	src := s.opts.Repos.Remove(root)
	if src == nil {
		return Errorf(CodeNotFound, "failed to unregister '%s', repository not found", root)
	}
	ctx := context.Background()
	names, err := src.Models(ctx)
	if err != nil {
		s.log.Warn("unregistered repository not listed; its models' state is kept", "root", root, "err", err)
	}
	for _, name := range names {
		if s.opts.Namespacing {
			s.forget(repo.Key(src.String(), name)) // no other root has this key
			continue
		}
		if _, err := s.opts.Repos.Find(ctx, name); err == nil {
			continue // another root serves the name
		}
		s.forget(name)
	}
	return nil
}

// forget drops name's state when no version of it serves, loads or
// unloads.
func (s *Server) forget(name string) {
	defer s.lockModel(name)()
	s.mu.Lock()
	defer s.unlock()
	m := s.models[name]
	if m == nil {
		return
	}
	for _, slot := range m.versions {
		if slot.mv != nil || slot.state == StateLoading || slot.state == StateUnloading {
			return
		}
	}
	delete(s.models, name)
	// A forgotten namespaced model leaves the global map too: a
	// multi-model endpoint's names then stay unknown (Triton's 400).
	if id, ok := s.ids[name]; ok {
		delete(s.global[id.name], name)
		if len(s.global[id.name]) == 0 {
			delete(s.global, id.name)
		}
		delete(s.ids, name)
	}
}
