package core

import (
	"sync"
	"time"
)

// LoadWindow is the shortest span a version's load rates cover once it has
// served that long: Load compares the counters with a sample it kept at
// least one window earlier (between one and two windows when reports come
// often; the load itself for a younger version), so a burst of reports
// never divides by a few microseconds.
const LoadWindow = time.Second

// Load is one model version's load, for ORCA load reports. Gauges are read
// now; rates and fractions cover Window.
type Load struct {
	// Pending is the requests queued now, waiting for an instance
	// (nv_inference_pending_request_count).
	Pending int64
	// Instances is the active instances; Busy, those executing now.
	Instances, Busy int
	// Window is the span the figures below cover.
	Window time.Duration
	// Utilization is the fraction of the instances' time spent executing
	// (compute start to end of each finished execution), in [0, 1].
	Utilization float64
	// RPS and EPS are the requests that ended, and those that failed, per
	// second.
	RPS, EPS float64
	// BatchFill is the average executed batch over max_batch_size (1 for
	// a model that does not batch); 0 when nothing ran in the window.
	BatchFill float64
}

// loadSample is the cumulative counters Load differences, at one instant.
type loadSample struct {
	at                 time.Time
	busyNs             uint64 // execution time, summed over executions
	requests, failures uint64
	execs, batched     uint64 // executions, and the batch sizes they ran
}

// loadWindow holds the samples a version's load is measured against. Only
// Load takes its lock: requests that ask for no report never touch it.
type loadWindow struct {
	mu         sync.Mutex
	base, next loadSample
	started    bool
}

// Load returns the version's load now. It reads the counters the
// statistics already keep (taking their lock once) and the scheduler's
// busy-instance count: a request that asks for no report pays nothing.
func (mv *ModelVersion) Load() Load { return mv.loadAt(time.Now()) }

func (mv *ModelVersion) loadAt(now time.Time) Load {
	cur, pending, loaded := mv.Stats.loadSample(now)
	var l Load
	l.Pending = pending
	if s, ok := mv.exec.(*scheduler); ok {
		l.Instances = len(s.insts)
		l.Busy = int(s.busy.Load())
	}

	w := &mv.load
	w.mu.Lock()
	if !w.started {
		// Counters start at zero when the version is loaded (a reload's
		// copy counts afresh), so the first window opens there.
		w.base, w.next, w.started = loadSample{at: loaded}, loadSample{at: loaded}, true
	}
	base := w.base
	if now.Sub(w.next.at) >= LoadWindow {
		w.base, w.next = w.next, cur
	}
	w.mu.Unlock()

	l.Window = now.Sub(base.at)
	secs := l.Window.Seconds()
	if secs <= 0 {
		return l
	}
	d := func(a, b uint64) float64 {
		if b > a {
			return float64(b - a)
		}
		return 0
	}
	l.RPS = d(base.requests, cur.requests) / secs
	l.EPS = d(base.failures, cur.failures) / secs
	if l.Instances > 0 {
		l.Utilization = min(d(base.busyNs, cur.busyNs)/(float64(l.Window.Nanoseconds())*float64(l.Instances)), 1)
	}
	if execs := d(base.execs, cur.execs); execs > 0 {
		maxBS := float64(max(mv.Config.GetMaxBatchSize(), 1))
		l.BatchFill = d(base.batched, cur.batched) / execs / maxBS
	}
	return l
}

// loadSample reads the cumulative counters Load needs, the pending gauge
// and when the version was loaded, without copying the batch table.
func (s *Stats) loadSample(now time.Time) (loadSample, int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := loadSample{
		at:       now,
		requests: s.snap.Success.Count + s.snap.Fail.Count,
		failures: s.snap.Fail.Count,
	}
	for _, b := range s.snap.Batches {
		out.busyNs += b.ComputeInput.Ns + b.ComputeInfer.Ns + b.ComputeOutput.Ns
		out.execs += b.ComputeInfer.Count
		out.batched += b.BatchSize * b.ComputeInfer.Count
	}
	loaded := s.loadedAt
	if loaded.IsZero() || loaded.After(now) {
		// Not through a repository load (tests building versions by
		// hand): the window starts now.
		loaded = now
	}
	return out, s.snap.Pending, loaded
}
