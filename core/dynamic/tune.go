package dynamic

import (
	"slices"
	"time"
)

// Tune sets the dynamic batcher's max_queue_delay and preferred batch
// sizes while it serves (core.Tuner, for core/autopilot). Batches already
// taken run as formed; queued requests are formed under the new settings at
// the next look, which the poke makes at once. Sizes outside 1 to
// max_batch_size are dropped; none left means max_batch_size, as in a
// config without preferred sizes. The default scheduler (no
// dynamic_batching) forms no batches and ignores it.
func (s *scheduler) Tune(delay time.Duration, preferred []int64) {
	if !s.cfg.batching {
		return
	}
	var pref []int64
	for _, p := range preferred {
		if p >= 1 && p <= s.cfg.maxBS {
			pref = append(pref, p)
		}
	}
	if len(pref) == 0 {
		pref = []int64{s.cfg.maxBS}
	}
	slices.Sort(pref)
	pref = slices.Compact(pref)
	s.mu.Lock()
	s.cfg.delay = max(delay, 0)
	s.cfg.pref, s.cfg.maxPref = pref, pref[len(pref)-1]
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
