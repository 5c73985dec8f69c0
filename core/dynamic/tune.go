package dynamic

import (
	"slices"
	"time"
)

// Tune sets the dynamic batcher's max_queue_delay and preferred batch
// sizes while it serves (core.Tuner, for core/autopilot). Batches already
// taken run as formed; queued requests are formed under the new settings at
// the next look, which the poke makes at once; the sizes go through
// setPreferred as the config's do. The default scheduler (no
// dynamic_batching) forms no batches and ignores it.
func (s *scheduler) Tune(delay time.Duration, preferred []int64) {
	if !s.cfg.batching {
		return
	}
	s.mu.Lock()
	s.cfg.delay = max(delay, 0)
	s.cfg.setPreferred(preferred)
	s.mu.Unlock()
	s.poke()
}

// Tuning is the queue delay and preferred sizes in force.
func (s *scheduler) Tuning() (time.Duration, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.delay, slices.Clone(s.cfg.pref)
}

// Pipelined says some instance has a pipeline worker (pipeline.go), which
// takes a batch as soon as one is due while the instance still executes.
func (s *scheduler) Pipelined() bool { return len(s.pipes) > 0 }
