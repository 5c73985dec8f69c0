package core

import (
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Duration is a (count, total nanoseconds) pair, as in the statistics extension.
type Duration struct {
	Count uint64
	Ns    uint64
}

func (d *Duration) add(ns int64) {
	d.Count++
	if ns > 0 {
		d.Ns += uint64(ns)
	}
}

// BatchStats are the compute durations of executions of one batch size.
type BatchStats struct {
	BatchSize                                 uint64
	ComputeInput, ComputeInfer, ComputeOutput Duration
}

// FailureReason labels nv_inference_request_failure.
type FailureReason int

// Failure reasons, as Triton's metrics name them.
const (
	FailBackend FailureReason = iota
	FailCanceled
	FailOther
	FailRejected
	numFailureReasons
)

func (r FailureReason) String() string {
	return [...]string{"BACKEND", "CANCELED", "OTHER", "REJECTED"}[r]
}

// FailureReasons lists every reason in label order.
var FailureReasons = [...]FailureReason{FailBackend, FailCanceled, FailOther, FailRejected}

// Stats holds the statistics of one model version. The statistics endpoint
// and the Prometheus metrics both read it, so the two never disagree.
//
// Every request adds to the counters twice (its execution, its end), so
// they are split over shards, each with its own lock, and a request adds to
// its processor's shard (take): with one lock per version, requests on many
// cores queued on it (BENCHMARKS.md, "Scaling with cores"). Snapshot holds
// every shard's lock while it sums them, so what it reports is as exact and
// as consistent as one lock made it.
type Stats struct {
	// shards hold the counters; a zero Stats counts in one.
	shards []statsShard
	mask   uint32 // len(shards)-1, a power of two less one
	one    [1]statsShard
	pick   sync.Pool     // *statsShard: each processor's last (take)
	next   atomic.Uint32 // the shard take hands out when the pool has none
	// obs, when set at load, also sees each request's durations (latency
	// summaries and histograms live in the metrics package).
	obs    Observer
	obsNow atomic.Pointer[Observer]
	// pending is the queued requests; the schedulers change it under
	// their own queue's lock.
	pending atomic.Int64

	mu sync.Mutex // loadSeconds and loadedAt
	// loadSeconds is how long the load took.
	loadSeconds float64
	// loadedAt is when the version finished loading: where its first
	// utilization window (utilization.go) starts.
	loadedAt time.Time
}

// statsShard is one share of a version's counters.
type statsShard struct {
	mu   sync.Mutex
	snap StatsSnapshot // the counters and Batches; not the gauges
	// running is this shard's share of the requests executing now
	// (running.go), kept apart from mu: it changes twice per request.
	running atomic.Int64
	// Keeps the next shard's lock off this one's cache line.
	_ [64]byte
}

// maxStatsShards bounds the shards of one version: a snapshot locks each.
const maxStatsShards = 32

// newStats makes a version's statistics with a shard per processor (a
// power of two, at most maxStatsShards).
func newStats() *Stats {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxStatsShards {
		n *= 2
	}
	return &Stats{shards: make([]statsShard, n), mask: uint32(n - 1)}
}

// take is the shard this processor adds to: the one it used last (a
// sync.Pool keeps one per processor), so that a shard's cache line stays
// with the core that writes it; give hands it back. A shard picked at
// random instead moved between cores on nearly every request, which cost
// more than the one lock on 2 cores (BENCHMARKS.md, "Scaling with cores").
// Two requests of one processor at once (one preempted between take and
// give) get two shards: the pool, then the next in turn.
func (s *Stats) take() *statsShard {
	switch {
	case s.shards == nil:
		return &s.one[0]
	case s.mask == 0:
		return &s.shards[0]
	}
	if sh, ok := s.pick.Get().(*statsShard); ok {
		return sh
	}
	return &s.shards[s.next.Add(1)&s.mask]
}

func (s *Stats) give(sh *statsShard) {
	if s.mask != 0 {
		s.pick.Put(sh)
	}
}

// lock takes this processor's shard and locks it; unlock undoes both.
func (s *Stats) lock() *statsShard {
	sh := s.take()
	sh.mu.Lock()
	return sh
}

func (s *Stats) unlock(sh *statsShard) {
	sh.mu.Unlock()
	s.give(sh)
}

// all is every shard.
func (s *Stats) all() []statsShard {
	if s.shards == nil {
		return s.one[:]
	}
	return s.shards
}

// Observer receives per-request durations that Stats only sums. The metrics
// package implements it for the *_summary_us families and the
// first-response histogram.
type Observer interface {
	// ObserveSuccess is called once per successful request.
	ObserveSuccess(d RequestDurations)
	// ObserveFirstResponse is called once per request that was scheduled,
	// when its (first and only) response is produced, success or failure.
	ObserveFirstResponse(ms uint64)
}

// CacheObserver is an Observer that also sees the response cache: a hit's
// queue and lookup time, a miss's lookup and insertion time, in whole
// microseconds (Triton's nv_cache_*_summary_per_model).
type CacheObserver interface {
	ObserveCacheHit(queueUs, lookupUs uint64)
	ObserveCacheMiss(us uint64)
}

// RequestDurations are one request's durations in whole microseconds
// (truncated, as Triton adds them).
type RequestDurations struct {
	RequestUs, QueueUs, ComputeInputUs, ComputeInferUs, ComputeOutputUs uint64
}

// ObserverFactory creates the Observer of a freshly loaded model version
// (nil: none). It runs before the version serves or warms up.
type ObserverFactory func(mv *ModelVersion) Observer

// StatsSnapshot is a copy of Stats at one instant.
type StatsSnapshot struct {
	LastInference                             int64 // ms since epoch
	InferenceCount                            uint64
	ExecutionCount                            uint64
	Success, Fail, Queue                      Duration
	ComputeInput, ComputeInfer, ComputeOutput Duration
	CacheHit, CacheMiss                       Duration
	// CacheHitUs and CacheMissUs are the cache durations in whole
	// microseconds per request, for nv_cache_hit/miss_duration_per_model.
	CacheHitUs, CacheMissUs uint64
	Batches                 []BatchStats // ascending batch size
	Failures                [numFailureReasons]uint64
	// Microsecond totals for the *_duration_us counters; Triton truncates
	// each request's duration to µs before adding it.
	RequestUs, QueueUs, ComputeInputUs, ComputeInferUs, ComputeOutputUs uint64
	Pending                                                             int64
	// Running is the requests an instance is executing now (inferd's own
	// gauge, not in Triton's statistics; see running.go).
	Running     int64
	LoadSeconds float64
}

// Observer is the Observer the factory gave this version at load (nil:
// none); the metrics package exports what its own observers hold.
//
// It reads the copy setObserver keeps for other goroutines: a hot reload
// swaps a fresh version's observer at its commit, while that version's
// autopilot watch may already be reading it (the request path reads obs,
// which no request reaches before the commit).
func (s *Stats) Observer() Observer {
	if p := s.obsNow.Load(); p != nil {
		return *p
	}
	return nil
}

// setObserver sets the version's observer.
func (s *Stats) setObserver(o Observer) {
	s.obs = o
	s.obsNow.Store(&o)
}

// Snapshot copies the current values.
func (s *Stats) Snapshot() StatsSnapshot {
	shards := s.all()
	for i := range shards {
		shards[i].mu.Lock()
	}
	out := StatsSnapshot{Batches: []BatchStats{}}
	for i := range shards {
		sh := &shards[i]
		addCounters(&out, &sh.snap)
		out.Batches = mergeBatches(out.Batches, sh.snap.Batches)
	}
	for i := range shards {
		shards[i].mu.Unlock()
	}
	if len(out.Batches) == 0 {
		out.Batches = nil
	}
	out.Running = s.runningNow()
	out.Pending = s.pending.Load()
	s.mu.Lock()
	out.LoadSeconds = s.loadSeconds
	s.mu.Unlock()
	return out
}

// mergeBatches adds src's per-batch-size durations to dst; both ascend by
// batch size, and so does the result.
func mergeBatches(dst, src []BatchStats) []BatchStats {
	for _, b := range src {
		i := sort.Search(len(dst), func(i int) bool { return dst[i].BatchSize >= b.BatchSize })
		if i == len(dst) || dst[i].BatchSize != b.BatchSize {
			dst = slices.Insert(dst, i, BatchStats{BatchSize: b.BatchSize})
		}
		d := &dst[i]
		for _, p := range [...][2]*Duration{{&d.ComputeInput, &b.ComputeInput}, {&d.ComputeInfer, &b.ComputeInfer}, {&d.ComputeOutput, &b.ComputeOutput}} {
			p[0].Count += p[1].Count
			p[0].Ns += p[1].Ns
		}
	}
	return dst
}

// requestTimes are the timestamps of one request's life (Triton keeps
// the same ones: triton-inference-server/core src/infer_stats.cc).
type requestTimes struct {
	req, queue, exec, cin, cout, execEnd time.Time
}

// recordSuccess records one successful request of batch size bs.
func (s *Stats) recordSuccess(t requestTimes, end time.Time, bs uint64) {
	reqNs := end.Sub(t.req).Nanoseconds()
	queueNs := t.exec.Sub(t.queue).Nanoseconds()
	cinNs := t.cin.Sub(t.exec).Nanoseconds()
	inferNs := t.cout.Sub(t.cin).Nanoseconds()
	coutNs := t.execEnd.Sub(t.cout).Nanoseconds()
	d := RequestDurations{us(reqNs), us(queueNs), us(cinNs), us(inferNs), us(coutNs)}
	if s.obs != nil {
		s.obs.ObserveSuccess(d)
		s.obs.ObserveFirstResponse(uint64(max(reqNs, 0) / 1e6))
	}
	sh := s.lock()
	defer s.unlock(sh)
	sh.snap.LastInference = end.UnixMilli()
	sh.snap.InferenceCount += max(bs, 1)
	sh.snap.Success.add(reqNs)
	sh.snap.Queue.add(queueNs)
	sh.snap.ComputeInput.add(cinNs)
	sh.snap.ComputeInfer.add(inferNs)
	sh.snap.ComputeOutput.add(coutNs)
	sh.snap.RequestUs += d.RequestUs
	sh.snap.QueueUs += d.QueueUs
	sh.snap.ComputeInputUs += d.ComputeInputUs
	sh.snap.ComputeInferUs += d.ComputeInferUs
	sh.snap.ComputeOutputUs += d.ComputeOutputUs
}

// recordCacheHit records a request answered from the response cache, as
// Triton's UpdateSuccessCacheHit (triton-inference-server/core
// src/infer_stats.cc): a success whose queue time ends where the lookup
// starts, with no inference, execution or compute counted.
func (s *Stats) recordCacheHit(req, queue, lookup, end time.Time, lookupNs int64) {
	reqNs := end.Sub(req).Nanoseconds()
	queueNs := lookup.Sub(queue).Nanoseconds()
	if co, ok := s.obs.(CacheObserver); ok {
		co.ObserveCacheHit(us(queueNs), us(lookupNs))
	}
	sh := s.lock()
	defer s.unlock(sh)
	sh.snap.Success.add(reqNs)
	sh.snap.Queue.add(queueNs)
	sh.snap.CacheHit.add(lookupNs)
	sh.snap.RequestUs += us(reqNs)
	sh.snap.QueueUs += us(queueNs)
	sh.snap.CacheHitUs += us(lookupNs)
}

// recordCacheMiss adds a miss's lookup and insertion time to the request
// duration already recorded, as Triton's UpdateSuccessCacheMiss.
func (s *Stats) recordCacheMiss(ns int64) {
	if co, ok := s.obs.(CacheObserver); ok {
		co.ObserveCacheMiss(us(ns))
	}
	sh := s.lock()
	defer s.unlock(sh)
	if ns > 0 {
		sh.snap.Success.Ns += uint64(ns)
	}
	sh.snap.CacheMiss.add(ns)
	sh.snap.RequestUs += us(ns)
	sh.snap.CacheMissUs += us(ns)
}

// recordFailure records one request that failed after it was scheduled.
func (s *Stats) recordFailure(start, end time.Time, reason FailureReason) {
	if s.obs != nil {
		s.obs.ObserveFirstResponse(uint64(max(end.Sub(start).Nanoseconds(), 0) / 1e6))
	}
	sh := s.lock()
	defer s.unlock(sh)
	sh.snap.LastInference = end.UnixMilli()
	sh.snap.Fail.add(end.Sub(start).Nanoseconds())
	sh.snap.Failures[reason]++
}

// recordExecution records one backend execution of batch size bs.
func (s *Stats) recordExecution(bs uint64, cin, infer, cout int64) {
	sh := s.lock()
	defer s.unlock(sh)
	sh.snap.ExecutionCount++
	i := sort.Search(len(sh.snap.Batches), func(i int) bool { return sh.snap.Batches[i].BatchSize >= bs })
	if i == len(sh.snap.Batches) || sh.snap.Batches[i].BatchSize != bs {
		sh.snap.Batches = append(sh.snap.Batches, BatchStats{})
		copy(sh.snap.Batches[i+1:], sh.snap.Batches[i:])
		sh.snap.Batches[i] = BatchStats{BatchSize: bs}
	}
	b := &sh.snap.Batches[i]
	b.ComputeInput.add(cin)
	b.ComputeInfer.add(infer)
	b.ComputeOutput.add(cout)
}

// AddPending changes the queued-requests gauge by d; the schedulers call
// it under their queue's lock, so it is never ahead of the queue.
func (s *Stats) AddPending(d int64) { s.pending.Add(d) }

func (s *Stats) setLoadDuration(d time.Duration) {
	s.mu.Lock()
	s.loadSeconds = d.Seconds()
	s.loadedAt = time.Now()
	s.mu.Unlock()
}

func us(ns int64) uint64 {
	if ns <= 0 {
		return 0
	}
	return uint64(ns / 1000)
}
