package core

import (
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
// models stay loaded until unloaded.
func (s *Server) UnregisterRepository(root string) error {
	if !s.opts.Repos.Remove(root) {
		return Errorf(CodeNotFound, "failed to unregister '%s', repository not found", root)
	}
	return nil
}
