// Package sequence is Triton's sequence batcher
// (triton-inference-server/server docs/user_guide/architecture.md
// "Stateful Models", triton-inference-server/core
// src/sequence_batch_scheduler/): each sequence is bound to one slot of one
// instance from its START to its END, with the direct and oldest
// strategies, control inputs, implicit state, iterative sequences and the
// idle reaper. It reaches the core through the seam in core/seam.go
// (core.Sequences, core.SequenceScheduler, core.Runner and the Job's
// scheduler methods); the core keeps what spans copies of a model (a
// reload's handover, the server's exit).
package sequence

import (
	"log/slog"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Batchers makes the sequence batchers of a server's sequence_batching
// models: the server's core.Options.Sequences.
type Batchers struct{}

// Configure reads cfg's sequence_batching and the initial state files
// under modelDir (core.Sequences).
func (Batchers) Configure(cfg *modelconfig.ModelConfig, modelDir string) (core.SequenceConfig, error) {
	sc, err := newSeqConfig(cfg, modelDir)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// New makes the sequence batcher of one version (core.SequenceConfig).
func (sc *seqConfig) New(insts []core.Instance, limits ratelimit.Slots, stats *core.Stats, log *slog.Logger) core.SequenceScheduler {
	return newSeqBatcher(sc, insts, limits, stats, log)
}
