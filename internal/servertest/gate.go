package servertest

import (
	"context"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Gate is an in-Go identity backend named "gate" whose executions wait for
// the test: each one reports on Entered, then holds its requests until
// Release is closed (or its context ends), so that a test knows a request
// is in flight and decides when it ends.
type Gate struct {
	Entered chan struct{}
	Release chan struct{}
}

// NewGate returns a closed-door Gate.
func NewGate() *Gate {
	return &Gate{Entered: make(chan struct{}, 64), Release: make(chan struct{})}
}

// Name implements core.Backend.
func (*Gate) Name() string { return "gate" }

// AutoComplete implements core.Backend; the config must be complete.
func (*Gate) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

// NewInstance implements core.Backend.
func (g *Gate) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, gateInstance{g}), nil
}

type gateInstance struct{ g *Gate }

func (i gateInstance) Execute(ctx context.Context, b *core.ConcatBatch) error {
	select {
	case i.g.Entered <- struct{}{}:
	default:
	}
	select {
	case <-i.g.Release:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	b.ComputeStart, b.InferStart = now, now
	err := identityInstance{}.Execute(ctx, b)
	b.InferEnd, b.ComputeEnd = time.Now(), time.Now()
	return err
}

func (gateInstance) Close() error { return nil }
