package core

import (
	"sync"
	"time"
)

// UtilizationWindow is the shortest span a version's rates cover once it
// has served that long: Utilization compares the counters with a sample it
// kept at least one window earlier (between one and two windows when
// reports come often; the load itself for a younger version), so a burst
// of reports never divides by a few microseconds.
const UtilizationWindow = time.Second

// Utilization is how busy one model version is, for ORCA load reports.
// Gauges are read now; rates and fractions cover Window.
type Utilization struct {
	// Pending is the requests queued now, waiting for an instance
	// (nv_inference_pending_request_count).
	Pending int64
	// Instances is the active instances; Busy, those executing now.
	Instances, Busy int
	// Window is the span the figures below cover.
	Window time.Duration
	// Compute is the fraction of the instances' time spent executing
	// (compute start to end of each finished execution), in [0, 1].
	Compute float64
	// RPS and EPS are the requests that ended, and those that failed, per
	// second.
	RPS, EPS float64
	// BatchFill is the average executed batch over max_batch_size (1 for
	// a model that does not batch); 0 when nothing ran in the window.
	BatchFill float64
}

// utilizationSample is the cumulative counters Utilization differences, at
// one instant.
type utilizationSample struct {
	at                 time.Time
	busyNs             uint64 // execution time, summed over executions
	requests, failures uint64
	execs, batched     uint64 // executions, and the batch sizes they ran
}

// utilizationWindow holds the samples a version's utilization is measured
// against. Only Utilization takes its lock: requests that ask for no report
// never touch it.
type utilizationWindow struct {
	mu         sync.Mutex
	base, next utilizationSample
	started    bool
}

// Utilization returns the version's utilization now. It reads the counters
// the statistics already keep (taking their lock once) and the scheduler's
// busy-instance count: a request that asks for no report pays nothing.
func (mv *ModelVersion) Utilization() Utilization { return mv.utilizationAt(time.Now()) }

func (mv *ModelVersion) utilizationAt(now time.Time) Utilization {
	cur, pending, loaded := mv.Stats.utilizationSample(now)
	var u Utilization
	u.Pending = pending
	if mv.batch != nil {
		u.Instances, u.Busy = mv.batch.Load()
	}

	w := &mv.util
	w.mu.Lock()
	if !w.started {
		// Counters start at zero when the version is loaded (a reload's
		// copy counts afresh), so the first window opens there.
		w.base, w.next, w.started = utilizationSample{at: loaded}, utilizationSample{at: loaded}, true
	}
	base := w.base
	if now.Sub(w.next.at) >= UtilizationWindow {
		w.base, w.next = w.next, cur
	}
	w.mu.Unlock()

	u.Window = now.Sub(base.at)
	secs := u.Window.Seconds()
	if secs <= 0 {
		return u
	}
	d := func(a, b uint64) float64 {
		if b > a {
			return float64(b - a)
		}
		return 0
	}
	u.RPS = d(base.requests, cur.requests) / secs
	u.EPS = d(base.failures, cur.failures) / secs
	if u.Instances > 0 {
		u.Compute = min(d(base.busyNs, cur.busyNs)/(float64(u.Window.Nanoseconds())*float64(u.Instances)), 1)
	}
	if execs := d(base.execs, cur.execs); execs > 0 {
		maxBS := float64(max(mv.Config.GetMaxBatchSize(), 1))
		u.BatchFill = d(base.batched, cur.batched) / execs / maxBS
	}
	return u
}

// utilizationSample reads the cumulative counters Utilization needs, the
// pending gauge and when the version was loaded, without copying the batch
// table.
func (s *Stats) utilizationSample(now time.Time) (utilizationSample, int64, time.Time) {
	out := utilizationSample{at: now}
	shards := s.all()
	for i := range shards {
		shards[i].mu.Lock()
	}
	for i := range shards {
		sh := &shards[i].snap
		out.requests += sh.Success.Count + sh.Fail.Count
		out.failures += sh.Fail.Count
		for _, b := range sh.Batches {
			out.busyNs += b.ComputeInput.Ns + b.ComputeInfer.Ns + b.ComputeOutput.Ns
			out.execs += b.ComputeInfer.Count
			out.batched += b.BatchSize * b.ComputeInfer.Count
		}
	}
	for i := range shards {
		shards[i].mu.Unlock()
	}
	s.mu.Lock()
	loaded := s.loadedAt
	s.mu.Unlock()
	if loaded.IsZero() || loaded.After(now) {
		// Not through a repository load (tests building versions by
		// hand): the window starts now.
		loaded = now
	}
	return out, s.pending.Load(), loaded
}
