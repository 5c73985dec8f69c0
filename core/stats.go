package core

import (
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
type Stats struct {
	mu   sync.Mutex
	snap StatsSnapshot
	// obs, when set at load, also sees each request's durations (latency
	// summaries and histograms live in the metrics package).
	obs Observer
	// loadedAt is when the version finished loading: where its first
	// utilization window (utilization.go) starts.
	loadedAt time.Time
	// running is the requests executing now (running.go), kept apart
	// from mu: it changes twice per request on the hot path.
	running atomic.Int64
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
func (s *Stats) Observer() Observer { return s.obs }

// Snapshot copies the current values.
func (s *Stats) Snapshot() StatsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.snap
	out.Batches = append([]BatchStats(nil), s.snap.Batches...)
	out.Running = s.running.Load()
	return out
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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.LastInference = end.UnixMilli()
	s.snap.InferenceCount += max(bs, 1)
	s.snap.Success.add(reqNs)
	s.snap.Queue.add(queueNs)
	s.snap.ComputeInput.add(cinNs)
	s.snap.ComputeInfer.add(inferNs)
	s.snap.ComputeOutput.add(coutNs)
	s.snap.RequestUs += d.RequestUs
	s.snap.QueueUs += d.QueueUs
	s.snap.ComputeInputUs += d.ComputeInputUs
	s.snap.ComputeInferUs += d.ComputeInferUs
	s.snap.ComputeOutputUs += d.ComputeOutputUs
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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Success.add(reqNs)
	s.snap.Queue.add(queueNs)
	s.snap.CacheHit.add(lookupNs)
	s.snap.RequestUs += us(reqNs)
	s.snap.QueueUs += us(queueNs)
	s.snap.CacheHitUs += us(lookupNs)
}

// recordCacheMiss adds a miss's lookup and insertion time to the request
// duration already recorded, as Triton's UpdateSuccessCacheMiss.
func (s *Stats) recordCacheMiss(ns int64) {
	if co, ok := s.obs.(CacheObserver); ok {
		co.ObserveCacheMiss(us(ns))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns > 0 {
		s.snap.Success.Ns += uint64(ns)
	}
	s.snap.CacheMiss.add(ns)
	s.snap.RequestUs += us(ns)
	s.snap.CacheMissUs += us(ns)
}

// recordFailure records one request that failed after it was scheduled.
func (s *Stats) recordFailure(start, end time.Time, reason FailureReason) {
	if s.obs != nil {
		s.obs.ObserveFirstResponse(uint64(max(end.Sub(start).Nanoseconds(), 0) / 1e6))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.LastInference = end.UnixMilli()
	s.snap.Fail.add(end.Sub(start).Nanoseconds())
	s.snap.Failures[reason]++
}

// recordExecution records one backend execution of batch size bs.
func (s *Stats) recordExecution(bs uint64, cin, infer, cout int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.ExecutionCount++
	i := sort.Search(len(s.snap.Batches), func(i int) bool { return s.snap.Batches[i].BatchSize >= bs })
	if i == len(s.snap.Batches) || s.snap.Batches[i].BatchSize != bs {
		s.snap.Batches = append(s.snap.Batches, BatchStats{})
		copy(s.snap.Batches[i+1:], s.snap.Batches[i:])
		s.snap.Batches[i] = BatchStats{BatchSize: bs}
	}
	b := &s.snap.Batches[i]
	b.ComputeInput.add(cin)
	b.ComputeInfer.add(infer)
	b.ComputeOutput.add(cout)
}

func (s *Stats) AddPending(d int64) {
	s.mu.Lock()
	s.snap.Pending += d
	s.mu.Unlock()
}

func (s *Stats) setLoadDuration(d time.Duration) {
	s.mu.Lock()
	s.snap.LoadSeconds = d.Seconds()
	s.loadedAt = time.Now()
	s.mu.Unlock()
}

func us(ns int64) uint64 {
	if ns <= 0 {
		return 0
	}
	return uint64(ns / 1000)
}
