package orca

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// countingGatherer counts the gathers of the registry it wraps.
type countingGatherer struct {
	prometheus.Gatherer
	n atomic.Int64
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.n.Add(1)
	return g.Gatherer.Gather()
}

func kvRegistry(t *testing.T) (*countingGatherer, *prometheus.GaugeVec) {
	t.Helper()
	kv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: kvFamily, Help: "KV-cache blocks"}, []string{kvBlockTypeLabel})
	reg := prometheus.NewRegistry()
	reg.MustRegister(kv)
	kv.WithLabelValues("tokens_per").Set(64)
	kv.WithLabelValues("used").Set(2)
	kv.WithLabelValues("max").Set(8)
	return &countingGatherer{Gatherer: reg}, kv
}

// TestKVCache: the KV-cache figures are gathered once per kvCache however
// many reports ask, fresh after it; a request that does not ask gathers
// nothing; and with the cache off every report gathers.
func TestKVCache(t *testing.T) {
	g, kv := kvRegistry(t)
	r := New(Options{Metrics: g, root: t.TempDir()})
	if r.kvTTL != kvCache {
		t.Fatalf("default reuse %v, want %v", r.kvTTL, kvCache)
	}
	t0 := time.Now()
	check := func(at time.Duration, wantUtil float64, wantGathers int64) {
		t.Helper()
		util, capacity, ok := r.kv(t0.Add(at))
		if !ok || util != wantUtil || capacity != 512 || g.n.Load() != wantGathers {
			t.Fatalf("at %v: %v %v %v after %d gathers; want %v 512 true after %d", at, util, capacity, ok, g.n.Load(), wantUtil, wantGathers)
		}
	}
	check(0, 0.25, 1)
	kv.WithLabelValues("used").Set(4)
	check(kvCache/2, 0.25, 1)         // reused
	check(-time.Millisecond, 0.25, 1) // a report that took its time before the read
	check(kvCache, 0.5, 2)            // stale: read again
	check(kvCache+1, 0.5, 2)

	// A request that does not ask costs no gather; one that asks, within
	// the reuse, neither.
	out := http.Header{}
	r.SetGenerateHeaders(out, http.Header{})
	if g.n.Load() != 2 || len(out) != 0 {
		t.Fatalf("a request without the header: %d gathers, headers %v", g.n.Load(), out)
	}

	// Concurrent reports on a stale cache gather once.
	g2, _ := kvRegistry(t)
	r2 := New(Options{Metrics: g2, root: t.TempDir(), kvCache: time.Hour})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			out := http.Header{}
			r2.SetGenerateHeaders(out, http.Header{canonicalRequestHeader: {"json"}})
			// Header is set lower-case, as Triton writes it: not through Get.
			if got := map[string][]string(out)[Header]; len(got) != 1 || got[0] != `JSON {"named_metrics":{"kv_cache_utilization":0.25,"max_token_capacity":512}}` {
				t.Errorf("report %q", got)
			}
		})
	}
	wg.Wait()
	if n := g2.n.Load(); n != 1 {
		t.Fatalf("16 concurrent reports gathered %d times, want 1", n)
	}

	// Off: every report reads the family.
	g3, kv3 := kvRegistry(t)
	r3 := New(KVCacheOff(Options{Metrics: g3, root: t.TempDir()}))
	r3.kv(t0)
	kv3.WithLabelValues("used").Set(8)
	if util, _, _ := r3.kv(t0); util != 1 || g3.n.Load() != 2 {
		t.Fatalf("cache off: util %v after %d gathers", util, g3.n.Load())
	}
}
