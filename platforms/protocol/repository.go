package protocol

import (
	"context"
	"strconv"

	"github.com/inferd/inferd/core"
)

// IndexEntry is one row of the repository index (triton-inference-server/server
// docs/protocol/extension_model_repository.md). Name is always set; the
// others are "" when the core
// has nothing for them (a model that never had a version has only a name).
type IndexEntry struct {
	Name    string
	Version string // decimal
	State   string // UNKNOWN, READY, UNAVAILABLE, LOADING, UNLOADING
	Reason  string
}

// RepositoryIndex lists the models of the repositories with every known
// version, only the READY ones when readyOnly. A failed scan is INTERNAL.
func RepositoryIndex(ctx context.Context, c *core.Server, readyOnly bool) ([]IndexEntry, error) {
	entries, err := c.Index(ctx, readyOnly)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "%v", err)
	}
	out := make([]IndexEntry, len(entries))
	for i, e := range entries {
		out[i] = IndexEntry{Name: e.Name, Reason: e.Reason}
		if e.Version >= 0 {
			out[i].Version = strconv.FormatInt(e.Version, 10)
		}
		if e.State != core.StateUnknown {
			out[i].State = e.State.String()
		}
	}
	return out, nil
}

// CheckExplicit is ErrNotExplicit unless models are loaded and unloaded
// explicitly; transports check it before they read load or unload
// parameters, as Triton does.
func CheckExplicit(c *core.Server) error {
	if c.ControlMode() != core.ModeExplicit {
		return ErrNotExplicit
	}
	return nil
}

// Load loads (or reloads) name, with ov's config and files when it is not
// nil. The load outlives the request: a client that gives up (or drops the
// connection) does not cancel it half-way.
func Load(ctx context.Context, c *core.Server, name string, ov *core.LoadOverride) error {
	if err := CheckExplicit(c); err != nil {
		return err
	}
	return c.Load(context.WithoutCancel(ctx), name, ov)
}

// Unload unloads name; an unknown or never-loaded name is not an error.
// dependents is unload_dependents: an ensemble takes the composing models
// loaded only for it along.
func Unload(ctx context.Context, c *core.Server, name string, dependents bool) error {
	if err := CheckExplicit(c); err != nil {
		return err
	}
	return c.UnloadDependents(ctx, name, dependents)
}
