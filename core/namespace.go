package core

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/inferd/inferd/repo"
)

// Model namespacing (--model-namespacing), as Triton's model repository
// manager does it (triton-inference-server/core
// src/model_repository_manager/model_repository_manager.cc): every
// repository root is a namespace, a model is identified by (namespace,
// name), and the registry keys it by repo.Key, Triton's
// ModelIdentifier::str(). Without namespacing the key is the name, so
// the registry is what it always was.

// modelID is a model's identity.
type modelID struct{ namespace, name string }

func (id modelID) key() string { return repo.Key(id.namespace, id.name) }

// idOf returns the identity of registry key key.
func (s *Server) idOf(key string) modelID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.idOfLocked(key)
}

func (s *Server) idOfLocked(key string) modelID {
	if id, ok := s.ids[key]; ok {
		return id
	}
	return modelID{name: key}
}

// register records id in the name -> identities map requests are
// resolved through (Triton's global map) and returns its key.
func (s *Server) register(id modelID) string {
	s.mu.Lock()
	defer s.unlock()
	key := id.key()
	if s.ids == nil {
		s.ids = map[string]modelID{}
	}
	s.ids[key] = id
	s.globalAddLocked(id)
	return key
}

// globalAddLocked adds id to the global map; s.mu must be held.
func (s *Server) globalAddLocked(id modelID) {
	if s.global == nil {
		s.global = map[string]map[string]bool{}
	}
	if s.global[id.name] == nil {
		s.global[id.name] = map[string]bool{}
	}
	s.global[id.name][id.key()] = true
}

// deregisterLocked drops key from the global map, as an unload does in
// Triton; the name stays, with no identity left. s.mu must be held.
func (s *Server) deregisterLocked(key string) {
	if id, ok := s.ids[key]; ok {
		delete(s.global[id.name], key)
	}
}

// resolve finds the one key a request's model name stands for, with
// Triton's errors (ModelRepositoryManager::FindModelIdentifier): a name
// never loaded is INVALID_ARG, one whose every identity was unloaded is
// NOT_FOUND, one in several namespaces is ambiguous.
func (s *Server) resolve(name string) (string, error) {
	if !s.opts.Namespacing {
		return name, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys, ok := s.global[name]
	switch {
	case !ok:
		return "", Errorf(CodeInvalidArg, "Request for unknown model: '%s' is not found", name)
	case len(keys) == 0:
		return "", Errorf(CodeNotFound, "Identifier of model '%s' is not found in global map", name)
	case len(keys) > 1:
		return "", Errorf(CodeInvalidArg, "There are %d identifiers of model '%s' in global map, model namespace must be provided to resolve ambiguity.", len(keys), name)
	}
	for k := range keys {
		return k, nil
	}
	return "", nil
}

// keysFor lists the keys a load or unload of name acts on: every
// namespace's model of that name (Triton loads and unloads them all).
func (s *Server) keysFor(name string) []string {
	if !s.opts.Namespacing {
		return []string{name}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.global[name]) == 0 {
		return []string{name}
	}
	return slices.Sorted(maps.Keys(s.global[name]))
}

// locate finds the repository folder of the model with key key: in its
// own root under namespacing, in whichever root holds the name without.
func (s *Server) locate(ctx context.Context, key string) (repo.Location, error) {
	id := s.idOf(key)
	if id.namespace == "" {
		return s.opts.Repos.Find(ctx, id.name)
	}
	return s.opts.Repos.FindIn(ctx, id.namespace, id.name)
}

// stepKey is the key of the model an ensemble step runs: the step's
// model_namespace is set when the ensemble loads (loadComposing).
func stepKey(namespace, name string) string { return repo.Key(namespace, name) }

// loadNamespaced is Load with namespacing: the name loads from every root
// that holds it, each copy under its own key, and the failures are joined
// as Triton joins them ("load failed for model '<namespace>::<name>': ...",
// one line each), unless some copy could not be read at all: that is the
// one "failed to poll" answer, as Triton checks the poll first
// (ModelRepositoryManager::LoadUnloadModel). Model files in the override
// load without a namespace, as in Triton.
func (s *Server) loadNamespaced(ctx context.Context, name string, ov *LoadOverride) error {
	if ov != nil && len(ov.Files) > 0 {
		return s.loadKey(ctx, s.register(modelID{name: name}), ov)
	}
	locs, _ := s.opts.Repos.FindAll(ctx, name)
	if len(locs) == 0 {
		return s.loadKey(ctx, name, ov) // fails to poll, as without namespacing
	}
	var lines strings.Builder
	polled := true
	for _, loc := range locs {
		err := s.loadKey(ctx, s.register(modelID{loc.Source.String(), name}), ov)
		var e *Error
		switch {
		case err == nil:
		case !errors.As(err, &e):
			return err
		case e.Code == CodeInvalidArg:
			lines.WriteString(e.Msg)
		case *e == *pollFailure(name):
			polled = false
		default:
			return err
		}
	}
	switch {
	case !polled:
		return pollFailure(name)
	case lines.Len() > 0:
		return Errorf(CodeInvalidArg, "%s", lines.String())
	}
	return nil
}

// loadStep loads an ensemble's composing model dep: the one in the
// ensemble's namespace when own (stepKeys found it there), else as Load
// does.
func (s *Server) loadStep(ctx context.Context, namespace, dep string, own bool) error {
	if !own {
		return s.Load(ctx, dep, nil)
	}
	return s.loadKey(ctx, s.register(modelID{namespace, dep}), nil)
}

// stepTarget is the key of the model an ensemble step in namespace runs:
// the name itself without namespacing; with it, the model of that name in
// namespace, else the only one of that name.
func (s *Server) stepTarget(namespace, dep string) (string, error) {
	if !s.opts.Namespacing {
		return dep, nil
	}
	if key := repo.Key(namespace, dep); s.registered(key) {
		return key, nil
	}
	return s.resolve(dep)
}

// registered reports whether key is in the global map.
func (s *Server) registered(key string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.ids[key]
	return ok && s.global[id.name][key]
}

// inRepository reports whether some root holds a folder named name.
func (s *Server) inRepository(ctx context.Context, name string) bool {
	if s.opts.Namespacing {
		locs, _ := s.opts.Repos.FindAll(ctx, name)
		return len(locs) > 0
	}
	_, err := s.opts.Repos.Find(ctx, name)
	return !errors.Is(err, repo.ErrModelNotFound)
}

// loadScanned loads the model a repository scan found under key (a
// namespaced key with namespacing).
func (s *Server) loadScanned(ctx context.Context, key string, loc repo.Location) error {
	if !s.opts.Namespacing {
		return s.Load(ctx, key, nil)
	}
	return s.loadKey(ctx, s.register(modelID{loc.Source.String(), loc.Model}), nil)
}

// Namespacing reports whether the server runs with --model-namespacing.
func (s *Server) Namespacing() bool { return s.opts.Namespacing }

// reregister puts a namespaced key back in the global map when it loads
// again (an ensemble reloading after its composing model came back);
// names never registered stay out, so unknown names leave no trace.
func (s *Server) reregister(key string) {
	s.mu.Lock()
	defer s.unlock()
	if id, ok := s.ids[key]; ok {
		s.globalAddLocked(id)
	}
}

// key is the version's model's registry key: the response cache keys
// entries by it, so same-named models of two namespaces never share them.
func (mv *ModelVersion) key() string { return repo.Key(mv.Namespace, mv.Name) }

// Resolve reports the error a request naming model name meets before any
// version is looked at: with namespacing, Triton's unknown, unloaded and
// ambiguous names (resolve); nil without.
func (s *Server) Resolve(name string) error {
	_, err := s.resolve(name)
	return err
}

// stepKeys are the keys loadStep loads for an ensemble's composing model
// dep: the ensemble's circular-dependency check looks for them in the
// chain of ensembles being loaded. own reports that dep is the one in the
// ensemble's namespace (with namespacing), which loadStep then loads.
func (s *Server) stepKeys(ctx context.Context, namespace, dep string) (keys []string, own bool) {
	if !s.opts.Namespacing {
		return []string{dep}, false
	}
	if namespace != "" {
		if _, err := s.opts.Repos.FindIn(ctx, namespace, dep); err == nil {
			return []string{repo.Key(namespace, dep)}, true
		}
	}
	locs, _ := s.opts.Repos.FindAll(ctx, dep)
	if len(locs) == 0 {
		return []string{dep}, false
	}
	keys = make([]string, 0, len(locs))
	for _, loc := range locs {
		keys = append(keys, repo.Key(loc.Source.String(), dep))
	}
	return keys, false
}
