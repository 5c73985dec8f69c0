package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/cache"
)

// The per-model response cache families, which Triton exports only for
// models whose response cache is enabled (triton-inference-server/core
// src/metrics.cc and src/metric_model_reporter.cc).
var (
	famCacheHits     = family{"nv_cache_num_hits_per_model", "Number of cache hits per model", prometheus.CounterValue}
	famCacheHitUs    = family{"nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", prometheus.CounterValue}
	famCacheMisses   = family{"nv_cache_num_misses_per_model", "Number of cache misses per model", prometheus.CounterValue}
	famCacheMissUs   = family{"nv_cache_miss_duration_per_model", "Total cache miss (insert+lookup) duration per model, in microseconds", prometheus.CounterValue}
	cacheModelFamily = [...]family{famCacheHits, famCacheHitUs, famCacheMisses, famCacheMissUs}
)

// emitCache sends one version's cache series.
func emitCache(emit func(f family, v float64, extraName, extraValue string), st core.StatsSnapshot) {
	for i, v := range [...]uint64{st.CacheHit.Count, st.CacheHitUs, st.CacheMiss.Count, st.CacheMissUs} {
		emit(cacheModelFamily[i], float64(v), "", "")
	}
}

// cacheSummaries are Triton's nv_cache_hit/miss_summary_per_model, kept
// with summary_latencies=true for versions whose response cache is on.
type cacheSummaries struct{ hit, miss prometheus.Summary }

func newCacheSummaries(c Config, labels prometheus.Labels) *cacheSummaries {
	return &cacheSummaries{
		hit:  c.newSummary("nv_cache_hit_summary_per_model", "Summary of cache hit counts/durations per model, in microseconds.", labels),
		miss: c.newSummary("nv_cache_miss_summary_per_model", "Summary of cache miss counts/durations per model, in microseconds.", labels),
	}
}

// ObserveCacheHit implements core.CacheObserver: as Triton, a hit is
// observed in the queue summary and the hit summary.
func (o *observer) ObserveCacheHit(queueUs, lookupUs uint64) {
	if o.summaries != nil {
		o.summaries[1].Observe(float64(queueUs))
	}
	if o.cache != nil {
		o.cache.hit.Observe(float64(lookupUs))
	}
}

// ObserveCacheMiss implements core.CacheObserver.
func (o *observer) ObserveCacheMiss(us uint64) {
	if o.cache != nil {
		o.cache.miss.Observe(float64(us))
	}
}

// LocalCacheCollector exports the local cache's own gauges, as Triton's
// local cache does (triton-inference-server/local_cache
// src/local_cache.cc, InitMetrics).
func LocalCacheCollector(stats func() cache.LocalStats) prometheus.Collector {
	return localCache{stats}
}

type localCache struct{ stats func() cache.LocalStats }

var localCacheDescs = [...]*prometheus.Desc{
	prometheus.NewDesc("nv_cache_util", "Cache utilization [0.0 - 1.0]", nil, nil),
	prometheus.NewDesc("nv_cache_num_entries", "Number of responses stored in response cache", nil, nil),
	prometheus.NewDesc("nv_cache_num_hits", "Number of cache hits in response cache", nil, nil),
	prometheus.NewDesc("nv_cache_num_misses", "Number of cache misses in response cache", nil, nil),
	prometheus.NewDesc("nv_cache_num_lookups", "Number of cache lookups in response cache", nil, nil),
	prometheus.NewDesc("nv_cache_num_evictions", "Number of cache evictions in response cache", nil, nil),
	prometheus.NewDesc("nv_cache_lookup_duration", "Total cache lookup duration (hit and miss), in microseconds", nil, nil),
	prometheus.NewDesc("nv_cache_insertion_duration", "Total cache insertion duration, in microseconds", nil, nil),
}

func (c localCache) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range localCacheDescs {
		ch <- d
	}
}

func (c localCache) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for i, v := range [...]float64{s.Util, float64(s.Entries), float64(s.Hits), float64(s.Misses), float64(s.Lookups),
		float64(s.Evictions), float64(s.LookupUs), float64(s.InsertUs)} {
		ch <- prometheus.MustNewConstMetric(localCacheDescs[i], prometheus.GaugeValue, v)
	}
}
