package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/inferd/inferd/repo/modelconfig"
)

// ErrRetuneStale is Retune's answer when the version it was to replace no
// longer serves (unloaded, or reloaded by someone else meanwhile): the
// autopilot must not bring back a model its user took down.
var ErrRetuneStale = errors.New("the version to retune no longer serves")

// Retune reloads mv's model with cfg in place of its configuration, the
// model's files unchanged: what the autopilot (core/autopilot) does to
// change what only a reload can, the instance count and ONNX Runtime's
// threads. It goes the way of any reload with a config override: the new
// copy loads beside mv and serves before mv retires, which finishes what
// it holds, so no request is dropped or failed; a failed load leaves mv
// serving. Unlike a user's override it keeps the repository fingerprint,
// so that polling (and a plain load of the unchanged model) takes the
// files for unchanged and does not undo it.
func (s *Server) Retune(ctx context.Context, mv *ModelVersion, cfg *modelconfig.ModelConfig) error {
	js, err := modelconfig.MarshalJSON(cfg)
	if err != nil {
		return fmt.Errorf("retune %s: %w", mv.Name, err)
	}
	return s.loadKey(ctx, mv.key(), &LoadOverride{ConfigJSON: string(js), replaces: mv})
}

// loadedFingerprint is the fingerprint of the files name serves from (""
// after a user's override or a partial failure).
func (s *Server) loadedFingerprint(name string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m := s.models[name]; m != nil {
		return m.loaded
	}
	return ""
}
