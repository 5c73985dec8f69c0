// Package repo reads Triton model repositories: the layout of model and
// version folders, config.pbtxt selection and label files. Where the bytes
// come from hides behind Source: a local folder (Dir, or Mapped when
// folders are served under other names), or an s3:// or gs:// root
// (Remote, over a Store from repo/s3 or repo/gcs) whose models are copied
// to local disk before they are read. A Set joins several roots.
package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Source is one repository root.
type Source interface {
	// String is the root as the user gave it (a path, s3://..., gs://...).
	String() string
	// Models lists the model candidates: every first-level folder.
	Models(ctx context.Context) ([]string, error)
	// Localize makes the model's folder available on local disk and returns
	// its path. Local roots return the folder itself.
	Localize(ctx context.Context, model string) (string, error)
	// Fingerprint summarises the model's files (names, sizes, times or
	// object versions): it changes whenever a file is added, removed or
	// rewritten, which is how polling and repeated loads tell a changed
	// model from an unchanged one.
	Fingerprint(ctx context.Context, model string) (string, error)
}

// VersionLocalizer is a Source whose Localize brings only the model's
// configuration and other non-version files (and empty version folders),
// so that only the versions the policy selects are then fetched. Its
// Localize also records the store's listing of the model beside the copy,
// which ReadModel reads for what the empty folders hold.
type VersionLocalizer interface {
	LocalizeVersions(ctx context.Context, model string, versions []int64) error
}

// Open returns the Source for one local --model-repository value; remote
// roots need OpenOptions with their stores.
func Open(ctx context.Context, root string) (Source, error) {
	return OpenOptions{}.Open(ctx, root)
}

// Location says where a model candidate lives.
type Location struct {
	Source Source
	Model  string
}

// Set is the union of several roots. Roots given at start-up are in
// Sources; Add and Remove change the set while serving (SageMaker's
// multi-model endpoint registers one root per loaded model).
type Set struct {
	Sources []Source
	// Namespacing makes every root its own namespace, as Triton's
	// --model-namespacing does (triton-inference-server/core
	// src/model_repository_manager/model_repository_manager.cc): Scan keys
	// a model by Key(root, name), and a name in two roots is no duplicate.
	Namespacing bool

	mu    sync.RWMutex
	added []Source
}

// ErrAlreadyRegistered is returned by Add for a root already in the set.
var ErrAlreadyRegistered = errors.New("repository is already registered")

// Add registers one more root.
func (s *Set) Add(src Source) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range append(slices.Clone(s.Sources), s.added...) {
		if have.String() == src.String() {
			return fmt.Errorf("%w: %s", ErrAlreadyRegistered, src)
		}
	}
	s.added = append(s.added, src)
	return nil
}

// Remove unregisters a root added with Add and returns it; nil when it was
// not there.
func (s *Set) Remove(root string) Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, src := range s.added {
		if src.String() == root {
			s.added = slices.Delete(s.added, i, i+1)
			return src
		}
	}
	return nil
}

// all is every root, start-up ones first.
func (s *Set) all() []Source {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append(slices.Clone(s.Sources), s.added...)
}

// OpenAll opens local roots; any failure is fatal, as in Triton.
func OpenAll(ctx context.Context, roots []string) (*Set, error) {
	return OpenOptions{}.OpenAll(ctx, roots)
}

// Scan lists every model candidate, keyed by name (by Key(root, name) with
// Namespacing). A name found in two roots is returned in dups (such a
// model is not loadable) and left out of models. A root that
// cannot be listed because it is unreachable (ErrUnreachable) leaves its
// models out and is reported in err alongside the others' models; any
// other listing failure returns no models.
func (s *Set) Scan(ctx context.Context) (models map[string]Location, dups map[string][]string, err error) {
	models = map[string]Location{}
	seen := map[string][]string{}
	var unreachable []error
	for _, src := range s.all() {
		names, err := src.Models(ctx)
		if errors.Is(err, ErrUnreachable) {
			unreachable = append(unreachable, err)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("scan repository %s: %w", src, err)
		}
		for _, n := range names {
			if s.Namespacing {
				models[Key(src.String(), n)] = Location{Source: src, Model: n}
				continue
			}
			seen[n] = append(seen[n], src.String())
			models[n] = Location{Source: src, Model: n}
		}
	}
	for n, roots := range seen {
		if len(roots) > 1 {
			if dups == nil {
				dups = map[string][]string{}
			}
			dups[n] = roots
			delete(models, n)
		}
	}
	return models, dups, errors.Join(unreachable...)
}

// ErrModelNotFound is returned by Find for a name no root holds.
var ErrModelNotFound = errors.New("model not found in any model repository")

// Find locates one model by name.
func (s *Set) Find(ctx context.Context, name string) (Location, error) {
	models, dups, err := s.Scan(ctx)
	if err != nil && (models == nil || !errors.Is(err, ErrUnreachable)) {
		return Location{}, err
	}
	if roots, ok := dups[name]; ok {
		sort.Strings(roots)
		return Location{}, fmt.Errorf("model '%s' appears in more than one repository (%s)", name, strings.Join(roots, ", "))
	}
	loc, ok := models[name]
	if !ok {
		if err != nil {
			// It may be in the root that cannot be reached.
			return Location{}, fmt.Errorf("%w: '%s' (%w)", ErrModelNotFound, name, err)
		}
		return Location{}, fmt.Errorf("%w: '%s'", ErrModelNotFound, name)
	}
	return loc, nil
}

// Key is a namespaced model's key: Triton's ModelIdentifier::str()
// ("<namespace>::<name>", triton-inference-server/core src/model.h), the
// name alone without a namespace.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "::" + name
}

// FindAll locates name in every root that holds it, the roots in
// ascending order (Triton keeps its repository paths in a sorted set).
// A root that cannot be reached is skipped and reported in err beside
// the roots found.
func (s *Set) FindAll(ctx context.Context, name string) ([]Location, error) {
	var out []Location
	var unreachable []error
	for _, src := range s.all() {
		names, err := src.Models(ctx)
		if errors.Is(err, ErrUnreachable) {
			unreachable = append(unreachable, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("scan repository %s: %w", src, err)
		}
		if slices.Contains(names, name) {
			out = append(out, Location{Source: src, Model: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source.String() < out[j].Source.String() })
	return out, errors.Join(unreachable...)
}

// FindIn locates name in the root given as root.
func (s *Set) FindIn(ctx context.Context, root, name string) (Location, error) {
	for _, src := range s.all() {
		if src.String() != root {
			continue
		}
		names, err := src.Models(ctx)
		if err != nil {
			return Location{}, fmt.Errorf("scan repository %s: %w", src, err)
		}
		if !slices.Contains(names, name) {
			break
		}
		return Location{Source: src, Model: name}, nil
	}
	return Location{}, fmt.Errorf("%w: '%s' in '%s'", ErrModelNotFound, name, root)
}
