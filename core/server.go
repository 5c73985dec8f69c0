package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/repo"
)

// ControlMode is --model-control-mode.
type ControlMode int

// Model control modes.
const (
	ModeNone ControlMode = iota
	ModePoll
	ModeExplicit
)

// ParseControlMode reads a --model-control-mode value (case-insensitive).
func ParseControlMode(s string) (ControlMode, error) {
	switch strings.ToLower(s) {
	case "none":
		return ModeNone, nil
	case "poll":
		return ModePoll, nil
	case "explicit":
		return ModeExplicit, nil
	}
	return 0, fmt.Errorf("unexpected value for --model-control-mode: %q (want none, poll or explicit)", s)
}

// Options configure a Server.
type Options struct {
	Repos       *repo.Set
	Backends    []Backend
	ControlMode ControlMode
	// StartupModels are the --load-model names for explicit mode ("*" = all).
	StartupModels   []string
	AutoComplete    bool
	ConfigName      string
	StrictReadiness bool
	// GPUs are the usable CUDA device ids (empty on CPU-only hosts).
	GPUs        []int32
	LoadThreads int
	// LoadRetries is how many times a model version whose load fails is
	// tried again (--model-load-retry-count).
	LoadRetries int
	Logger      *slog.Logger
	// Observers, when set, gives each loaded version an Observer (latency
	// summaries and histograms).
	Observers ObserverFactory
	// NoFileOverrides refuses loads whose override carries model files
	// (the repository API's "file:" parameters, pb_utils.load_model's
	// files): with them, whoever may load models may run code in the
	// server. Triton has no such switch; --allow-model-file-override=false.
	NoFileOverrides bool
	// Namespacing is --model-namespacing: the same name in two
	// repositories is two models (namespace.go). Repos must have
	// Namespacing set alike.
	Namespacing bool
	// RateLimiter is --rate-limit=execution_count's rate limiter, shared
	// by every model; nil: --rate-limit=off.
	RateLimiter *ratelimit.Limiter
	// ResponseCache, when set, serves the versions whose config enables
	// response_cache (--cache-config); nil: no version caches.
	ResponseCache cache.Store
	// Ensembles runs the ensemble models (core/ensemble's Scheduling);
	// nil: an ensemble fails to load.
	Ensembles Ensembles
	// Batching runs every other model (core/dynamic's Batchers); nil:
	// their loads fail.
	Batching Batching
	// Sequences runs the sequence_batching models (core/sequence's
	// Batchers); nil: their loads fail.
	Sequences Sequences
	// Autopilot, when set, tunes the batching of versions that declare a
	// latency target (core/autopilot); nil: none is tuned.
	Autopilot Autopilot
}

// Server is the inference core: the model registry, lifecycle and request
// entry point shared by every frontend.
type Server struct {
	opts     Options
	log      *slog.Logger
	backends map[string]Backend

	mu     sync.RWMutex
	models map[string]*modelState
	// routes is the serving versions as requests find them without mu
	// (routes.go); nil until a request builds it after a change.
	routes atomic.Pointer[routeTable]

	loadMu sync.Mutex
	loads  map[string]*nameLock // serialises loads of one model; only names in use

	// waiting maps a model to the ensembles unloaded because it was;
	// they load again when it does (under mu).
	waiting map[string][]string
	// stopping is set once Stop began the exit (under mu).
	stopping bool

	// ids are the identities of namespaced keys, global the keys of each
	// name (Triton's global map); both only with Namespacing (under mu).
	ids    map[string]modelID
	global map[string]map[string]bool
}

// nameLock is one model name's load/unload lock. It lives only while some
// call holds or waits for it, so names that are never loaded (a client
// asking for 100,000 unknown models) leave nothing behind.
type nameLock struct {
	mu   sync.Mutex
	refs int // holders and waiters, under Server.loadMu
}

type modelState struct {
	// reason is a model-level failure (config, files) that kept every
	// version from being attempted.
	reason   string
	versions map[int64]*versionSlot
	// loaded is the repository fingerprint of the files every serving
	// version was loaded from ("" after an override or a partial failure);
	// attempted is the fingerprint of the last load tried from the
	// repository, successful or not.
	loaded, attempted string
	// explicit is set once the model is loaded for itself; a model loaded
	// only as a composing model of ensembles is not, and
	// unload_dependents may take it with them.
	explicit bool
}

type versionSlot struct {
	state  State
	reason string
	mv     *ModelVersion // serving copy while READY
	// closed is closed once the copy an unload retired from this slot is
	// closed (while UNLOADING).
	closed <-chan struct{}
}

// NewServer builds a Server; Start loads the start-up models.
func NewServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LoadThreads < 1 {
		opts.LoadThreads = 4
	}
	if opts.Repos != nil {
		opts.Repos.Namespacing = opts.Namespacing
	}
	s := &Server{opts: opts, log: opts.Logger, backends: map[string]Backend{}, models: map[string]*modelState{}, loads: map[string]*nameLock{}}
	for _, b := range opts.Backends {
		s.backends[b.Name()] = b
	}
	if b, ok := opts.Autopilot.(AutopilotBinder); ok {
		b.Bind(s)
	}
	return s
}

// ControlMode returns the server's model control mode.
func (s *Server) ControlMode() ControlMode { return s.opts.ControlMode }

// ErrStartup is returned by Start when some start-up model failed.
var ErrStartup = errors.New("failed to load all models")

// Start loads the start-up models: every model in NONE and POLL modes, the
// --load-model names in EXPLICIT mode. It returns ErrStartup (wrapped with
// the failures) when any failed; the others serve regardless.
func (s *Server) Start(ctx context.Context) error {
	var names []string
	var scanned map[string]repo.Location // the scan's models by key, when scanned
	var dupErr, unreachableErr error
	if s.opts.ControlMode != ModeExplicit || slices.Contains(s.opts.StartupModels, "*") {
		models, dups, err := s.opts.Repos.Scan(ctx)
		if err != nil && !errors.Is(err, repo.ErrUnreachable) {
			return err
		}
		// An unreachable root fails the start-up (its models are missing)
		// but the others load; RetryUnreachable picks it up later.
		unreachableErr = err
		names = slices.Sorted(maps.Keys(models))
		scanned = models
		for n, roots := range dups {
			s.setModelFailure(n, fmt.Sprintf("model appears in more than one repository: %s", strings.Join(roots, ", ")))
		}
		if len(dups) > 0 {
			dupErr = fmt.Errorf("duplicate model names across repositories: %s", strings.Join(slices.Sorted(maps.Keys(dups)), ", "))
		}
	} else {
		names = s.opts.StartupModels
	}
	// Every other model loads regardless, so --exit-on-error=false serves them.
	errs := make([]error, len(names), len(names)+1)
	sem := make(chan struct{}, s.opts.LoadThreads)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if loc, ok := scanned[n]; ok {
				errs[i] = s.loadScanned(ctx, n, loc)
				return
			}
			errs[i] = s.Load(ctx, n, nil)
		}()
	}
	wg.Wait()
	if err := errors.Join(append(errs, dupErr, unreachableErr)...); err != nil {
		return fmt.Errorf("%w: %w", ErrStartup, err)
	}
	return nil
}

// Live reports whether the core is up.
func (s *Server) Live() bool { return true }

// Ready reports readiness: with strict readiness every known version must
// be READY or explicitly unloaded. The instances' own checks (a Python
// model's is_ready() is a round trip to its worker) run outside s.mu, so
// a slow one never holds up a load or unload, nor the requests behind it.
// They hold no reference either, so an unload need not wait for them: a
// version retired meanwhile does not count against readiness.
func (s *Server) Ready() bool {
	if !s.opts.StrictReadiness {
		return true
	}
	serving, ok := s.servingVersions()
	if !ok {
		return false
	}
	for _, mv := range serving {
		if mv.Healthy() != nil && s.serves(mv) {
			return false
		}
	}
	return true
}

// servingVersions reports whether every known version is READY or
// explicitly unloaded and, if so, returns the serving ones.
func (s *Server) servingVersions() (serving []*ModelVersion, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.models {
		for _, v := range m.versions {
			if v.state != StateReady && !(v.state == StateUnavailable && v.reason == "unloaded") {
				return nil, false
			}
			if v.mv != nil {
				serving = append(serving, v.mv)
			}
		}
	}
	return serving, true
}

// serves reports whether mv is still the serving copy of its version.
func (s *Server) serves(mv *ModelVersion) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.models[mv.key()]
	return m != nil && m.versions[mv.Version] != nil && m.versions[mv.Version].mv == mv
}

// Acquire finds the version that serves (name, version) and holds it until
// release is called. version LatestVersion picks the highest READY version.
// With namespacing, name must stand for one model (resolve).
func (s *Server) Acquire(name string, version int64) (mv *ModelVersion, release func(), err error) {
	if mv, release := s.route(name, version, true); mv != nil {
		return mv, release, nil
	}
	key, err := s.resolve(name)
	if err != nil {
		return nil, nil, err
	}
	return s.acquireKey(key, version)
}

// acquireKey is Acquire of the model with registry key name; its errors
// name the key, as Triton's name the model's identifier
// (triton-inference-server/core
// src/model_repository_manager/model_lifecycle.cc, GetModel).
func (s *Server) acquireKey(name string, version int64) (mv *ModelVersion, release func(), err error) {
	if mv, release := s.route(name, version, false); mv != nil {
		return mv, release, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.routes.Load() == nil {
		// The first request since a change builds the table the next
		// ones read; with the read lock held nothing changes meanwhile,
		// and a change drops the table under the write lock.
		s.routes.Store(s.routesLocked())
	}
	m := s.models[name]
	if m == nil || (len(m.versions) == 0 && m.reason == "") {
		return nil, nil, Errorf(CodeNotFound, "Request for unknown model: '%s' is not found", name)
	}
	if version == LatestVersion {
		best := int64(-1)
		for v, slot := range m.versions {
			if slot.state == StateReady && v > best {
				best = v
			}
		}
		if best < 0 {
			return nil, nil, Errorf(CodeNotFound, "Request for unknown model: '%s' has no available versions", name)
		}
		version = best
	}
	slot := m.versions[version]
	if slot == nil {
		return nil, nil, Errorf(CodeNotFound, "Request for unknown model: '%s' version %d is not found", name, version)
	}
	if slot.state != StateReady || slot.mv == nil {
		return nil, nil, Errorf(CodeUnavailable, "Request for unknown model: '%s' version %d is not at ready state", name, version)
	}
	release, ok := slot.mv.holds.acquire()
	if !ok {
		// Retired by a close that began under an earlier write lock
		// (a hot reload's replaced copy): the slot serves another now,
		// or soon; as before this lookup, the request is refused.
		return nil, nil, Errorf(CodeUnavailable, "Request for unknown model: '%s' version %d is not at ready state", name, version)
	}
	return slot.mv, release, nil
}

// GPUs are the CUDA devices KIND_GPU instance groups may use: none on a
// host without a usable GPU (the counterpart of Triton's CPU-only build).
func (s *Server) GPUs() []int32 { return s.opts.GPUs }

// Infer runs one request.
func (s *Server) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	mv, release, err := s.Acquire(req.ModelName, req.ModelVersion)
	if err != nil {
		return nil, err
	}
	defer release()
	return mv.Infer(ctx, req)
}

// ModelReady reports whether (name, version) can serve.
func (s *Server) ModelReady(name string, version int64) bool {
	mv, release, err := s.Acquire(name, version)
	if err != nil {
		return false
	}
	defer release()
	if err := mv.Healthy(); err != nil {
		s.log.Warn(fmt.Sprintf("Model '%s' version %d is not ready: %v", name, mv.Version, err))
		return false
	}
	return true
}

// ReadyVersions returns the READY versions of name (all models when name is
// empty), sorted by name then version.
func (s *Server) ReadyVersions(name string) []*ModelVersion {
	if name != "" {
		key, err := s.resolve(name)
		if err != nil {
			return nil
		}
		name = key
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*ModelVersion
	for n, m := range s.models {
		if name != "" && n != name {
			continue
		}
		for _, slot := range m.versions {
			if slot.state == StateReady && slot.mv != nil {
				out = append(out, slot.mv)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// IndexEntry is one row of the repository index.
type IndexEntry struct {
	Name    string
	Version int64 // -1 when the model never had versions
	State   State
	Reason  string
}

// Index lists the models of the repositories (as Triton, only names that
// have a folder) with every known version.
func (s *Server) Index(ctx context.Context, readyOnly bool) ([]IndexEntry, error) {
	models, dups, err := s.opts.Repos.Scan(ctx)
	if err != nil && !errors.Is(err, repo.ErrUnreachable) {
		return nil, err
	}
	// Rows are in Triton's order: by namespace (empty without
	// namespacing), then name.
	var ids []modelID
	for k, loc := range models {
		if s.opts.Namespacing {
			ids = append(ids, modelID{loc.Source.String(), loc.Model})
		} else {
			ids = append(ids, modelID{name: k})
		}
	}
	for n := range dups {
		ids = append(ids, modelID{name: n})
	}
	slices.SortFunc(ids, func(a, b modelID) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []IndexEntry
	for _, id := range ids {
		n := id.name
		m := s.models[id.key()]
		if m == nil || (len(m.versions) == 0 && m.reason == "") {
			if !readyOnly {
				out = append(out, IndexEntry{Name: n, Version: -1})
			}
			continue
		}
		if len(m.versions) == 0 {
			if !readyOnly {
				out = append(out, IndexEntry{Name: n, Version: -1, State: StateUnavailable, Reason: m.reason})
			}
			continue
		}
		for _, v := range slices.Sorted(maps.Keys(m.versions)) {
			slot := m.versions[v]
			if readyOnly && slot.state != StateReady {
				continue
			}
			out = append(out, IndexEntry{Name: n, Version: v, State: slot.state, Reason: slot.reason})
		}
	}
	return out, nil
}

// stateLocked returns name's state, creating it; s.mu must be held.
func (s *Server) stateLocked(name string) *modelState {
	m := s.models[name]
	if m == nil {
		m = &modelState{versions: map[int64]*versionSlot{}}
		s.models[name] = m
	}
	return m
}

func (s *Server) setModelFailure(name, reason string) {
	s.mu.Lock()
	defer s.unlock()
	m := s.stateLocked(name)
	m.reason = reason
}

// lockModel takes name's load/unload lock; unlock releases it and drops the
// lock's entry when nobody else holds or waits for it.
func (s *Server) lockModel(name string) (unlock func()) {
	s.loadMu.Lock()
	l := s.loads[name]
	if l == nil {
		l = &nameLock{}
		s.loads[name] = l
	}
	l.refs++
	s.loadMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.loadMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.loads, name)
		}
		s.loadMu.Unlock()
	}
}

// Shutdown unloads every model, all at once, each after its in-flight
// requests. When ctx ends first it gives up waiting and returns Triton's
// error for an expired exit timeout (triton-inference-server/core
// src/server.cc, InferenceServer::Stop), on which tritonserver exits with
// status 1.
func (s *Server) Shutdown(ctx context.Context) error {
	if b, ok := s.opts.Autopilot.(AutopilotBinder); ok {
		b.Close()
	}
	s.mu.Lock()
	var all []*ModelVersion
	// Versions an unload is still closing in the background (one a model
	// unloaded itself, say) count too: the exit waits for them as well.
	var closing []<-chan struct{}
	for _, m := range s.models {
		for _, slot := range m.versions {
			switch {
			case slot.mv != nil:
				all = append(all, slot.mv)
				// Copies a reload replaced stop waiting for their sequences.
				closing = append(closing, slot.mv.stopHandovers()...)
				slot.mv = nil
				slot.state, slot.reason = StateUnavailable, "unloaded"
			case slot.state == StateUnloading && slot.closed != nil:
				closing = append(closing, slot.closed)
			}
		}
	}
	s.unlock()
	if len(all) == 0 && len(closing) == 0 {
		return nil
	}
	// All at once: each version drains and finalizes within the same
	// deadline, instead of one slow finalize using up the others' time.
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, mv := range all {
			wg.Go(mv.close)
		}
		wg.Wait()
		for _, ch := range closing {
			<-ch
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // finished as the deadline passed (or nothing to unload)
			return nil
		default:
		}
		s.log.Warn("shutdown: gave up waiting for models to unload", "err", ctx.Err())
		return exitTimeout()
	}
}
