package core

import (
	"slices"
	"sync"
)

// metricCarry keeps one model version's Prometheus counters going across
// hot reloads, as Triton's reporters shared per label set do
// (triton-inference-server/core src/metric_model_reporter.cc): every copy that served the version adds
// to them, so a reload never makes a counter go down. The statistics
// endpoint stays per copy, as Triton's does. An explicit unload ends the
// chain; the next load starts from zero.
type metricCarry struct {
	mu       sync.Mutex
	done     StatsSnapshot   // counters of copies that have closed
	draining []*ModelVersion // replaced copies still finishing requests
}

// replace hands the chain from old to fresh; old keeps counting until it
// closes.
func (c *metricCarry) replace(old, fresh *ModelVersion) {
	c.mu.Lock()
	c.draining = append(c.draining, old)
	c.mu.Unlock()
	fresh.carry = c
	// The latency summaries and histogram go on too. fresh serves nothing
	// before the commit that calls this, so swapping its observer is safe.
	if old.Stats.obs != nil {
		fresh.Stats.setObserver(old.Stats.obs)
	}
}

// closed folds a replaced copy's final counters in.
func (c *metricCarry) closed(old *ModelVersion) {
	final := old.Stats.Snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.draining, old); i >= 0 {
		c.draining = slices.Delete(c.draining, i, i+1)
		addCounters(&c.done, &final)
	}
}

// total is live plus everything earlier copies counted.
func (c *metricCarry) total(live StatsSnapshot) StatsSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	addCounters(&live, &c.done)
	for _, d := range c.draining {
		s := d.Stats.Snapshot()
		addCounters(&live, &s)
	}
	return live
}

// addCounters adds the cumulative fields of src to dst (not the pending
// gauge, the load time or the per-batch-size table, which describe a copy).
func addCounters(dst, src *StatsSnapshot) {
	dst.LastInference = max(dst.LastInference, src.LastInference)
	dst.InferenceCount += src.InferenceCount
	dst.ExecutionCount += src.ExecutionCount
	for _, p := range [][2]*Duration{
		{&dst.Success, &src.Success}, {&dst.Fail, &src.Fail}, {&dst.Queue, &src.Queue},
		{&dst.ComputeInput, &src.ComputeInput}, {&dst.ComputeInfer, &src.ComputeInfer},
		{&dst.ComputeOutput, &src.ComputeOutput}, {&dst.CacheHit, &src.CacheHit}, {&dst.CacheMiss, &src.CacheMiss},
	} {
		p[0].Count += p[1].Count
		p[0].Ns += p[1].Ns
	}
	for i := range dst.Failures {
		dst.Failures[i] += src.Failures[i]
	}
	dst.RequestUs += src.RequestUs
	dst.QueueUs += src.QueueUs
	dst.ComputeInputUs += src.ComputeInputUs
	dst.ComputeInferUs += src.ComputeInferUs
	dst.ComputeOutputUs += src.ComputeOutputUs
	dst.CacheHitUs += src.CacheHitUs
	dst.CacheMissUs += src.CacheMissUs
}

// MetricsSnapshot is the version's counters for the metrics endpoint:
// this copy's statistics plus those of the copies it replaced in hot
// reloads. The pending gauge and load time are this copy's.
func (mv *ModelVersion) MetricsSnapshot() StatsSnapshot {
	return mv.carry.total(mv.Stats.Snapshot())
}
