package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inferd/inferd/core/padbatch"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/tempdir"
)

// LoadOverride is what the repository load API may carry: a configuration
// (JSON text of a ModelConfig) used instead of config.pbtxt and, optionally,
// the model's files themselves ("1/model.onnx" -> bytes).
type LoadOverride struct {
	ConfigJSON string
	Files      map[string][]byte
	// replaces is set by Retune: the copy this load replaces, which must
	// still serve, and whose files' fingerprint the load keeps.
	replaces *ModelVersion
}

func pollFailure(name string) *Error {
	return Errorf(CodeInternal, "failed to load '%s', failed to poll from model repository", name)
}

// Load loads (or reloads) a model. A failure while reading the repository
// or the configuration leaves any serving copy untouched and answers
// INTERNAL "failed to poll"; a failure while creating the versions answers
// INVALID_ARG "load failed for model ...". With namespacing it loads the
// name from every repository that holds it (loadNamespaced).
func (s *Server) Load(ctx context.Context, name string, ov *LoadOverride) error {
	if s.opts.Namespacing {
		return s.loadNamespaced(ctx, name, ov)
	}
	return s.loadKey(ctx, name, ov)
}

// loadKey is Load of the model with registry key name.
func (s *Server) loadKey(ctx context.Context, name string, ov *LoadOverride) error {
	if s.isStopping() {
		return errNotReady
	}
	s.reregister(name)
	if err := s.load(ctx, name, ov); err != nil {
		return err
	}
	// Ensembles that went down for want of this model come back with it,
	// as in Triton.
	chain, _ := ctx.Value(ensembleChainKey{}).([]string)
	for _, e := range s.takeWaiting(name) {
		if slices.Contains(chain, e) {
			continue // being loaded above this call
		}
		if err := s.loadKey(ctx, e, nil); err != nil {
			s.log.Error("failed to reload an ensemble after its composing model loaded", "ensemble", e, "model", name, "err", err)
		}
	}
	return nil
}

func (s *Server) load(ctx context.Context, name string, ov *LoadOverride) error {
	id := s.idOf(name)
	if err := checkModelName(id.name); err != nil {
		return err
	}
	if s.opts.NoFileOverrides && ov != nil && len(ov.Files) > 0 {
		return Errorf(CodeInvalidArg, "load failed for model '%s': loading model files from the load request ('file:' parameters) is disabled by --allow-model-file-override=false", name)
	}
	unlock := s.lockModel(name)
	defer func() { unlock() }()
	if ov != nil && ov.replaces != nil && !s.serves(ov.replaces) {
		return fmt.Errorf("retune %s: %w", name, ErrRetuneStale)
	}
	// A load asked for the model itself, not only as an ensemble's
	// composing model, marks it explicit once it has a state.
	if ctx.Value(ensembleChainKey{}) == nil {
		defer s.markExplicit(name)
	}

	start := time.Now()
	// One lookup serves the fingerprint and the read: for a remote root it
	// lists the store.
	var loc repo.Location
	var findErr error
	if ov == nil || len(ov.Files) == 0 {
		loc, findErr = s.locate(ctx, name)
	}
	// Loading a model whose files did not change since it loaded is a
	// no-op, as in Triton; an override always reloads.
	var fp string
	if ov == nil || ov.replaces != nil {
		if findErr == nil {
			fp, _ = loc.Source.Fingerprint(ctx, loc.Model)
		}
		switch {
		case ov != nil:
			// A retune: the fingerprints stay until it succeeds, and are
			// kept only if the files did not change since the last load.
			if fp != s.loadedFingerprint(name) {
				fp = ""
			}
		case fp != "" && s.unchanged(name, fp):
			s.log.Debug("model unchanged; not reloaded", "model", name)
			return nil
		default:
			s.setFingerprints(name, "", fp)
		}
	}
	// A remote root's copy of the model is held from before it is fetched:
	// it lives while this load or a version loaded from it holds it.
	var files *overrideDir
	if h, ok := loc.Source.(repo.Holder); ok && findErr == nil && (ov == nil || len(ov.Files) == 0) {
		files = heldCopy(h.Hold(loc.Model))
		defer files.release()
	}
	m, src, tmp, err := s.readModel(ctx, id.name, ov, loc, findErr)
	if tmp != "" {
		// The override's folder lives as long as a version loaded from it
		// (each holds it); this load's reference goes on every path out.
		files = newOverrideDir(tmp, s.log.With("model", name))
		defer files.release()
	}
	if err != nil {
		s.log.Error("failed to poll model", "model", name, "err", err)
		// A name with no folder leaves no trace (Triton: "could not poll",
		// not "deleted"); a folder that fails shows its reason in the index.
		if !errors.Is(err, repo.ErrModelNotFound) {
			s.setModelFailure(name, err.Error())
		}
		return pollFailure(id.name)
	}
	m.Namespace = id.namespace
	selected, err := s.selectVersions(ctx, name, id, m, src)
	if err != nil {
		return err
	}
	cfg, labels, err := s.checkedConfig(ctx, name, m, ov, selected)
	if err != nil {
		return err
	}
	if modelconfig.IsEnsemble(cfg) {
		// The composing models load first, without this model's lock: an
		// ensemble that (through others) depends on itself then fails
		// instead of waiting for itself.
		unlock()
		labels, err = s.composingLabels(ctx, id.namespace, cfg, labels)
		unlock = s.lockModel(name)
		if err != nil {
			return s.failVersions(name, selected, err.Error())
		}
	}

	// Load every selected version beside whatever serves now.
	s.markLoading(name, selected)
	fresh, failures := s.loadVersions(ctx, name, m, cfg, labels, selected, files, start, ov != nil && ov.replaces != nil)
	s.commit(name, fresh, failures)
	if len(failures) > 0 {
		return versionFailures(name, failures)
	}
	s.setFingerprints(name, fp, fp)
	s.log.Info("loaded model", "model", name, "versions", selected, "took", time.Since(start).Round(time.Millisecond),
		"instance_start", startsText(fresh, selected))
	return nil
}

// selectVersions are the versions of m its version policy selects, local:
// a remote repository fetches only those, and the repository agents
// (checksum) see their files before any backend does.
func (s *Server) selectVersions(ctx context.Context, name string, id modelID, m *repo.Model, src repo.Source) ([]int64, error) {
	selected, warnings := modelconfig.SelectVersions(m.Config, m.Versions)
	for _, w := range warnings {
		s.log.Error("version policy", "model", name, "warning", w)
	}
	if len(selected) == 0 {
		reason := fmt.Sprintf("at least one version must be available under the version policy of model '%s'", id.name)
		s.setModelFailure(name, reason)
		return nil, Errorf(CodeInvalidArg, "load failed for model '%s': %s\n", name, reason)
	}
	if vl, ok := src.(repo.VersionLocalizer); ok {
		if err := vl.LocalizeVersions(ctx, id.name, selected); err != nil {
			return nil, s.failVersions(name, selected, err.Error())
		}
	}
	if err := repo.RunAgents(ctx, m, selected); err != nil {
		return nil, s.failVersions(name, selected, err.Error())
	}
	return selected, nil
}

// checkedConfig is m's configuration, checked and completed, and its
// outputs' labels; a failure marks the selected versions failed.
func (s *Server) checkedConfig(ctx context.Context, name string, m *repo.Model, ov *LoadOverride, selected []int64) (*modelconfig.ModelConfig, map[string][]string, error) {
	// A load override names no host paths beyond the repository's own
	// (overridepaths.go), checked before any backend sees its config.
	if err := s.checkOverride(m, ov); err != nil {
		return nil, nil, s.failVersions(name, selected, err.Error())
	}
	cfg, err := s.completeConfig(ctx, m, selected)
	if err != nil {
		return nil, nil, s.failVersions(name, selected, err.Error())
	}
	labels, err := m.Labels()
	if err != nil {
		return nil, nil, s.failVersions(name, selected, err.Error())
	}
	return cfg, labels, nil
}

// composingLabels loads ensemble cfg's composing models and returns labels
// with the labels its outputs inherit from them (an output's own win).
func (s *Server) composingLabels(ctx context.Context, namespace string, cfg *modelconfig.ModelConfig, labels map[string][]string) (map[string][]string, error) {
	inherited, err := s.loadComposing(ctx, namespace, cfg)
	if err != nil {
		return labels, err
	}
	for _, out := range cfg.GetOutput() {
		if l := inherited[out.GetName()]; l != nil && labels[out.GetName()] == nil {
			if labels == nil {
				labels = map[string][]string{}
			}
			labels[out.GetName()] = l
		}
	}
	return labels, nil
}

// loadVersions loads each selected version of m (retried up to
// LoadRetries times), each holding files when not nil; failures hold the
// reasons of those that did not load. serial creates each version's
// instances one after another (a retune: newInstances).
func (s *Server) loadVersions(ctx context.Context, name string, m *repo.Model, cfg *modelconfig.ModelConfig, labels map[string][]string, selected []int64, files *overrideDir, start time.Time, serial bool) (fresh map[int64]*ModelVersion, failures map[int64]string) {
	backend := s.backends[cfg.GetBackend()]
	fresh = map[int64]*ModelVersion{}
	failures = map[int64]string{}
	for _, v := range selected {
		mv, err := s.loadVersion(ctx, backend, m, cfg, labels, v, serial)
		for try := 1; err != nil && try <= s.opts.LoadRetries && ctx.Err() == nil; try++ {
			s.log.Warn("retrying a failed model version load", "model", name, "version", v, "retry", try, "of", s.opts.LoadRetries, "err", err)
			mv, err = s.loadVersion(ctx, backend, m, cfg, labels, v, serial)
		}
		if err != nil {
			failures[v] = err.Error()
			s.log.Error("failed to load model version", "model", name, "version", v, "err", err)
			continue
		}
		mv.Stats.setLoadDuration(time.Since(start))
		if files != nil {
			mv.files = files.hold()
		}
		fresh[v] = mv
	}
	return fresh, failures
}

// versionFailures is the error of a load whose versions failed, by version.
func versionFailures(name string, failures map[int64]string) error {
	var msg strings.Builder
	for _, v := range slices.Sorted(maps.Keys(failures)) {
		fmt.Fprintf(&msg, "version %d is at UNAVAILABLE state: %s;", v, failures[v])
	}
	return Errorf(CodeInvalidArg, "load failed for model '%s': %s\n", name, msg.String())
}

// unchanged reports whether name serves every version from files with
// fingerprint fp.
func (s *Server) unchanged(name, fp string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.models[name]
	if m == nil || m.loaded != fp || len(m.versions) == 0 {
		return false
	}
	for _, slot := range m.versions {
		if slot.mv == nil && !(slot.state == StateUnavailable && slot.reason == "unloaded") {
			return false
		}
	}
	return true
}

// setFingerprints records a load attempt (attempted) and, when it served
// every version, its files (loaded). A name with no state and nothing to
// record gets none: unknown names must not grow the model table.
func (s *Server) setFingerprints(name, loaded, attempted string) {
	s.mu.Lock()
	defer s.unlock()
	m := s.models[name]
	if m == nil {
		if loaded == "" && attempted == "" {
			return
		}
		m = s.stateLocked(name)
	}
	m.loaded, m.attempted = loaded, attempted
}

func checkModelName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return Errorf(CodeInvalidArg, "Model name cannot be empty or whitespace")
	case strings.Contains(name, "/"), name == "..", name == ".":
		return Errorf(CodeInvalidArg, "invalid model name '%s'", name)
	}
	return nil
}

// readModel brings the model folder Load found to local disk (or writes the
// override's files to a temporary folder, tmp, which the caller removes
// once no version loaded from it lives)
// and reads its configuration.
func (s *Server) readModel(ctx context.Context, name string, ov *LoadOverride, loc repo.Location, findErr error) (m *repo.Model, src repo.Source, tmp string, err error) {
	var override *modelconfig.ModelConfig
	if ov != nil && ov.ConfigJSON != "" {
		cfg, err := modelconfig.ParseJSON([]byte(ov.ConfigJSON))
		if err != nil {
			return nil, nil, "", fmt.Errorf("invalid config override: %w", err)
		}
		override = cfg
	}
	var dir string
	if ov != nil && len(ov.Files) > 0 {
		if override == nil {
			return nil, nil, "", errors.New("the 'config' parameter must accompany 'file:' parameters")
		}
		if tmp, err = writeOverrideFiles(name, ov.Files); err != nil {
			return nil, nil, tmp, err
		}
		dir = tmp
	} else {
		if findErr != nil {
			return nil, nil, "", findErr
		}
		if dir, err = loc.Source.Localize(ctx, name); err != nil {
			return nil, nil, "", err
		}
		src = loc.Source
	}
	_, renamed := src.(*repo.Mapped)
	m, err = repo.ReadModel(dir, name, override, repo.ReadOptions{ConfigName: s.opts.ConfigName, AutoComplete: s.opts.AutoComplete, Renamed: renamed, Logger: s.log})
	return m, src, tmp, err
}

// writeOverrideFiles writes the load API's files to a new folder under the
// process's temporary folder (repo/tempdir), which the next start sweeps
// should this process die before removing it; the folder is returned even
// with an error, for the caller to remove.
func writeOverrideFiles(name string, files map[string][]byte) (string, error) {
	dir, err := tempdir.Make("model-" + name + "-")
	if err != nil {
		return "", fmt.Errorf("override files for %s: %w", name, err)
	}
	for rel, data := range files {
		clean := filepath.Clean(filepath.FromSlash(rel))
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			return dir, fmt.Errorf("override file path '%s' escapes the model directory", rel)
		}
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return dir, fmt.Errorf("override file %s: %w", rel, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return dir, fmt.Errorf("override file %s: %w", rel, err)
		}
	}
	return dir, nil
}

// completeConfig runs backend auto-complete (on the highest selected
// version), re-normalises, validates the tensors and the instance groups.
func (s *Server) completeConfig(ctx context.Context, m *repo.Model, selected []int64) (*modelconfig.ModelConfig, error) {
	cfg := m.Config
	if modelconfig.IsEnsemble(cfg) {
		// No backend, no instances: the composing models are checked once
		// they are loaded (loadComposing). An ensemble has no dynamic
		// batcher to pad with.
		if _, err := padbatch.Parse(cfg); err != nil {
			return nil, err
		}
		return cfg, nil
	}
	backend := s.backends[cfg.GetBackend()]
	if backend == nil {
		return nil, fmt.Errorf("unable to find backend '%s' for model '%s' (this server has: %s)", cfg.GetBackend(), m.Name, strings.Join(slices.Sorted(maps.Keys(s.backends)), ", "))
	}
	if s.opts.AutoComplete {
		v := selected[len(selected)-1]
		files := VersionFiles{ModelName: m.Name, Version: v, ModelDir: m.Dir, VersionDir: m.VersionDir(v)}
		if err := backend.AutoComplete(ctx, files, cfg); err != nil {
			return nil, err
		}
		if err := modelconfig.Normalize(cfg, m.Name, false); err != nil {
			return nil, err
		}
		if err := modelconfig.Validate(cfg, m.Name, true); err != nil {
			return nil, err
		}
	}
	if err := modelconfig.NormalizeInstanceGroups(cfg, s.opts.GPUs); err != nil {
		return nil, err
	}
	if _, err := padbatch.Parse(cfg); err != nil { // after auto-complete: its inputs
		return nil, err
	}
	return cfg, nil
}

func (s *Server) loadVersion(ctx context.Context, backend Backend, m *repo.Model, cfg *modelconfig.ModelConfig, labels map[string][]string, v int64, serial bool) (*ModelVersion, error) {
	if modelconfig.IsEnsemble(cfg) {
		mv := newModelVersion(m.Name, v, cfg)
		mv.Namespace, mv.Dir = m.Namespace, m.Dir
		mv.log = s.log.With("model", m.Name, "version", v)
		mv.Labels = labels
		mv.cache = s.responseCache(cfg)
		if s.opts.Observers != nil {
			mv.Stats.setObserver(s.opts.Observers(mv))
		}
		mv.exec = external{s.opts.Ensembles.New(ensembleHost{s}, cfg)}
		return mv, nil
	}
	var seq SequenceConfig
	if cfg.GetSequenceBatching() != nil {
		if s.opts.Sequences == nil {
			return nil, errNoSequences
		}
		var err error
		if seq, err = s.opts.Sequences.Configure(cfg, m.Dir); err != nil {
			return nil, err
		}
	}
	if seq == nil && s.opts.Batching == nil {
		return nil, errNoBatching
	}
	files := VersionFiles{ModelName: m.Name, Version: v, ModelDir: m.Dir, VersionDir: m.VersionDir(v)}
	// Passive instances are created (and so validated) but never get
	// requests from the scheduler.
	refs := modelconfig.Instances(cfg)
	insts, starts, err := newInstances(ctx, backend, refs, serial, func(ref modelconfig.InstanceRef) InstanceSpec {
		return InstanceSpec{VersionFiles: files, Name: ref.Name, Kind: ref.Kind, DeviceID: ref.DeviceID, Config: cfg, Server: s}
	})
	if err != nil {
		return nil, err
	}
	var active, passive []Instance
	var activeRefs []modelconfig.InstanceRef
	for i, ref := range refs {
		if ref.Passive {
			passive = append(passive, insts[i])
		} else {
			active = append(active, insts[i])
			activeRefs = append(activeRefs, ref)
		}
	}
	mv := newModelVersion(m.Name, v, cfg)
	mv.Namespace, mv.Dir = m.Namespace, m.Dir
	mv.log = s.log.With("model", m.Name, "version", v)
	mv.Labels = labels
	mv.passive = passive
	mv.starts = starts
	mv.cache = s.responseCache(cfg)
	if s.opts.Observers != nil {
		mv.Stats.setObserver(s.opts.Observers(mv))
	}
	// Warmup runs on every instance before the version can serve.
	for _, inst := range append(slices.Clone(active), passive...) {
		if err := mv.warmup(ctx, inst, m.Dir, seq); err != nil {
			for _, i := range append(active, passive...) {
				_ = i.Close()
			}
			return nil, err
		}
	}
	// Active instances join the rate limiter (passive ones never run
	// requests), which refuses resource counts that cannot serve them.
	limits, err := s.opts.RateLimiter.Register(cfg, activeRefs)
	if err != nil {
		for _, i := range append(active, passive...) {
			_ = i.Close()
		}
		return nil, err
	}
	if seq != nil {
		ss := seq.New(active, limits, mv.Stats, mv.log)
		mv.exec, mv.seqs = external{ss}, ss
	} else {
		b := s.opts.Batching.New(cfg, active, limits, mv.Stats, mv.log)
		mv.exec, mv.batch = external{b}, b
		if s.opts.Autopilot != nil {
			mv.slo = s.opts.Autopilot.Watch(mv, b)
		}
	}
	mv.insts = append(slices.Clone(active), passive...)
	return mv, nil
}

func (s *Server) markLoading(name string, versions []int64) {
	s.mu.Lock()
	defer s.unlock()
	m := s.stateLocked(name)
	m.reason = ""
	for _, v := range versions {
		if slot := m.versions[v]; slot == nil || slot.mv == nil {
			m.versions[v] = &versionSlot{state: StateLoading}
		}
	}
}

// commit swaps the freshly loaded versions in. With a serving copy present,
// a reload is all-or-nothing: any failure keeps the old copies serving. On
// a first load whatever succeeded serves and the failures show their reason.
func (s *Server) commit(name string, fresh map[int64]*ModelVersion, failures map[int64]string) {
	var retire []*ModelVersion
	s.mu.Lock()
	m := s.models[name]
	serving := false
	for _, slot := range m.versions {
		if slot.mv != nil {
			serving = true
		}
	}
	switch {
	case len(failures) > 0 && serving:
		for v, mv := range fresh {
			retire = append(retire, mv)
			delete(fresh, v)
			if slot := m.versions[v]; slot.mv == nil {
				// A version new to this load: it worked but is not committed.
				slot.state, slot.reason = StateUnavailable, "not loaded: another version of the model failed to load"
			}
		}
		for v, reason := range failures {
			if slot := m.versions[v]; slot.mv == nil {
				slot.state, slot.reason = StateUnavailable, reason
			}
		}
	default:
		for v, slot := range m.versions {
			_, loaded := fresh[v]
			_, failed := failures[v]
			if slot.mv != nil && !loaded && !failed && len(failures) == 0 {
				// No longer selected by the version policy.
				retire = append(retire, slot.mv)
				slot.mv = nil
				slot.state, slot.reason = StateUnavailable, "unloaded"
			}
		}
		for v, mv := range fresh {
			slot := m.versions[v]
			if slot.mv != nil {
				// A hot reload: the metrics go on counting, and the
				// sequences live on the old copy end there.
				slot.mv.carry.replace(slot.mv, mv)
				reacquire := func() (*ModelVersion, func(), error) { return s.acquireKey(name, v) }
				if h := retireSequences(slot.mv, reacquire); h != nil {
					mv.handovers = append(mv.handovers, h)
				}
				mv.handovers = append(mv.handovers, pendingHandovers(slot.mv.handovers)...)
			}
			slot.mv, slot.state, slot.reason = mv, StateReady, ""
		}
		for v, reason := range failures {
			m.versions[v].state, m.versions[v].reason = StateUnavailable, reason
		}
	}
	s.unlock()
	for _, mv := range retire {
		go mv.close() // in-flight requests finish on the old copy
	}
}

func (s *Server) failVersions(name string, versions []int64, reason string) error {
	s.mu.Lock()
	m := s.stateLocked(name)
	var msg strings.Builder
	for _, v := range versions {
		if slot := m.versions[v]; slot == nil || slot.mv == nil {
			m.versions[v] = &versionSlot{state: StateUnavailable, reason: reason}
		}
		fmt.Fprintf(&msg, "version %d is at UNAVAILABLE state: %s;", v, reason)
	}
	s.unlock()
	s.log.Error("failed to load model", "model", name, "err", reason)
	return Errorf(CodeInvalidArg, "load failed for model '%s': %s\n", name, msg.String())
}
