package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/inferd/inferd/repo"
)

// Poll applies repository changes once (POLL mode, triton-inference-server/
// server docs/user_guide/model_management.md): models that appeared or whose files changed are (re)loaded beside
// the serving copy, which keeps serving until the new one commits (or for
// good, when the new one fails); models whose folder is gone are unloaded.
// A repository that cannot be listed changes nothing.
func (s *Server) Poll(ctx context.Context) error {
	models, dups, err := s.opts.Repos.Scan(ctx)
	if err != nil && !errors.Is(err, repo.ErrUnreachable) {
		return fmt.Errorf("poll repositories: %w", err)
	}
	// With a root unreachable its models are missing from the scan, not
	// gone: nothing is unloaded until every root answers again.
	complete := err == nil
	for _, name := range slices.Sorted(maps.Keys(models)) {
		loc := models[name]
		fp, err := loc.Source.Fingerprint(ctx, loc.Model)
		if err != nil {
			s.log.Error("poll model", "model", name, "err", err)
			continue
		}
		if s.attempted(name) == fp {
			continue
		}
		if err := s.loadScanned(ctx, name, loc); err != nil {
			s.log.Error("poll: model failed to load", "model", name, "err", err)
		}
	}
	for _, name := range s.knownModels() {
		if _, ok := models[name]; ok || !complete {
			continue
		}
		if _, ok := dups[name]; ok {
			s.setModelFailure(name, "model appears in more than one repository: "+strings.Join(dups[name], ", "))
			continue
		}
		if err := s.Unload(ctx, name); err != nil {
			s.log.Error("poll: unload of removed model", "model", name, "err", err)
		} else {
			s.log.Info("poll: model removed from the repository; unloaded", "model", name)
		}
	}
	return err
}

// RetryUnreachable keeps scanning, with backoff, while some repository root
// is unreachable, and loads the start-up models that appear (every model in
// NONE and POLL modes, the --load-model names in EXPLICIT mode). It returns
// once every root answers or ctx ends.
func (s *Server) RetryUnreachable(ctx context.Context) {
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
		models, _, err := s.opts.Repos.Scan(ctx)
		if err != nil && !errors.Is(err, repo.ErrUnreachable) {
			s.log.Error("repository scan", "err", err)
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(models)) {
			if s.opts.ControlMode == ModeExplicit && !slices.Contains(s.opts.StartupModels, "*") && !slices.Contains(s.opts.StartupModels, models[name].Model) {
				continue
			}
			if s.attempted(name) != "" || s.known(name) {
				continue
			}
			if err := s.loadScanned(ctx, name, models[name]); err != nil {
				s.log.Error("model from a repository that came back failed to load", "model", name, "err", err)
			}
		}
		if err == nil {
			s.log.Info("every repository answers again")
			return
		}
	}
}

func (s *Server) known(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.models[name]
	return m != nil && (len(m.versions) > 0 || m.reason != "")
}

// PollEvery polls every interval until ctx ends.
func (s *Server) PollEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Poll(ctx); err != nil {
				s.log.Error("poll", "err", err)
			}
		}
	}
}

func (s *Server) attempted(name string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m := s.models[name]; m != nil {
		return m.attempted
	}
	return ""
}

// knownModels lists models that have (or had) versions and are not
// already unloaded.
func (s *Server) knownModels() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for name, m := range s.models {
		for _, slot := range m.versions {
			if !(slot.state == StateUnavailable && slot.reason == "unloaded") {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
