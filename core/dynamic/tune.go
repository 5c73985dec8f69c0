package dynamic

import (
	"slices"

	"github.com/inferd/inferd/core"
)

// Tune sets the dynamic batcher's max_queue_delay, preferred batch sizes
// and batch cap while it serves (core.Tuner, for core/autopilot). Batches
// already taken run as formed; queued requests are formed under the new
// settings at the next look, which the poke makes at once; the sizes go
// through setPreferred as the config's do, and the cap is clamped to
// max_batch_size (0 or more: none). The default scheduler (no
// dynamic_batching) forms no batches and ignores it.
func (s *scheduler) Tune(b core.BatchTuning) {
	if !s.cfg.batching {
		return
	}
	s.mu.Lock()
	s.cfg.delay = max(b.Delay, 0)
	s.cfg.cap = 0
	if b.MaxBatch > 0 && b.MaxBatch < s.cfg.maxBS {
		s.cfg.cap = b.MaxBatch
	}
	s.cfg.setPreferred(b.Preferred)
	s.mu.Unlock()
	s.poke()
}

// Tuning is the batching in force.
func (s *scheduler) Tuning() core.BatchTuning {
	s.mu.Lock()
	defer s.mu.Unlock()
	return core.BatchTuning{Delay: s.cfg.delay, Preferred: slices.Clone(s.cfg.pref), MaxBatch: s.cfg.cap}
}

// Pipelined says some instance has a pipeline worker (pipeline.go), which
// takes a batch as soon as one is due while the instance still executes.
func (s *scheduler) Pipelined() bool { return len(s.pipes) > 0 }
