package python

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Custom metrics (pb_utils.MetricFamily, triton-inference-server/
// python_backend README.md, "Custom Metrics"): models
// create families and metrics through their worker, and the backend
// exports them on the metrics endpoint as a prometheus.Collector. A metric
// lives while a worker that created it does: instances of a model may
// share one.

// Metric kinds, as pb_utils.MetricFamily.COUNTER, GAUGE and HISTOGRAM.
const (
	kindCounter = iota
	kindGauge
	kindHistogram
)

type customMetrics struct {
	mu       sync.Mutex
	families map[string]*customFamily
	byID     map[int64]*customMetric
	nextID   int64
}

type customFamily struct {
	name, help string
	kind       int
	metrics    map[string]*customMetric // by label key
}

type customMetric struct {
	id      int64
	family  *customFamily
	owners  map[*worker]bool // the workers that created it
	labels  map[string]string
	key     string
	value   float64   // counter, gauge
	buckets []float64 // histogram upper bounds
	counts  []uint64  // per bucket, not cumulative
	sum     float64
	count   uint64
}

// serverFamilies are the prefixes of the families the server exports
// itself (triton-inference-server/server docs/user_guide/metrics.md), and
// inferd_, inferd's own additions (docs/metrics.md): a custom family there
// would clash on /metrics.
var serverFamilies = []string{"nv_inference_", "nv_model_", "nv_cpu_", "nv_gpu_", "nv_energy_", "nv_pinned_", "nv_cache_", "inferd_"}

func newCustomMetrics() *customMetrics {
	return &customMetrics{families: map[string]*customFamily{}, byID: map[int64]*customMetric{}}
}

// family registers a family; one of the same name must match it.
func (c *customMetrics) family(name, help string, kind int) error {
	if kind < kindCounter || kind > kindHistogram {
		return fmt.Errorf("unknown metric kind %d", kind)
	}
	if name == "" {
		return fmt.Errorf("invalid metric family name '%s'", name)
	}
	// Other nv_ names are the model's to export, as Triton allows: the
	// KV-cache family of ORCA load reports is one.
	for _, own := range serverFamilies {
		if strings.HasPrefix(name, own) {
			return fmt.Errorf("metric family name '%s' is taken by the server's own metrics", name)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.families[name]; ok {
		if f.kind != kind || f.help != help {
			return fmt.Errorf("metric family '%s' already exists with a different kind or description", name)
		}
		return nil
	}
	c.families[name] = &customFamily{name: name, help: help, kind: kind, metrics: map[string]*customMetric{}}
	return nil
}

// metric creates (or finds) the metric of family name with labels.
func (c *customMetrics) metric(owner *worker, name string, labels map[string]string, buckets []float64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[name]
	if f == nil {
		return 0, fmt.Errorf("metric family '%s' does not exist", name)
	}
	key := labelKey(labels)
	if m, ok := f.metrics[key]; ok {
		m.owners[owner] = true
		return m.id, nil
	}
	if f.kind == kindHistogram {
		if len(buckets) == 0 {
			return 0, fmt.Errorf("histogram metric of family '%s' needs buckets", name)
		}
		if !slices.IsSorted(buckets) {
			return 0, fmt.Errorf("histogram buckets of family '%s' must be increasing", name)
		}
	}
	c.nextID++
	m := &customMetric{id: c.nextID, family: f, owners: map[*worker]bool{owner: true}, labels: labels, key: key, buckets: buckets}
	if f.kind == kindHistogram {
		m.counts = make([]uint64, len(buckets)+1)
	}
	f.metrics[key] = m
	c.byID[m.id] = m
	return m.id, nil
}

// update applies increment, set or observe.
func (c *customMetrics) update(id int64, action string, v float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byID[id]
	if m == nil {
		return fmt.Errorf("unknown metric %d", id)
	}
	switch {
	case action == "increment" && m.family.kind != kindHistogram:
		if m.family.kind == kindCounter && v < 0 {
			return fmt.Errorf("counter of family '%s' cannot be incremented by a negative value", m.family.name)
		}
		m.value += v
	case action == "set" && m.family.kind == kindGauge:
		m.value = v
	case action == "observe" && m.family.kind == kindHistogram:
		i, _ := slices.BinarySearch(m.buckets, v)
		m.counts[i]++
		m.sum += v
		m.count++
	default:
		return fmt.Errorf("%s is not supported on a metric of family '%s'", action, m.family.name)
	}
	return nil
}

func (c *customMetrics) value(id int64) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byID[id]
	if m == nil {
		return 0, fmt.Errorf("unknown metric %d", id)
	}
	if m.family.kind == kindHistogram {
		return m.sum, nil
	}
	return m.value, nil
}

// labelKey names a label set unambiguously: its pairs in name order, each
// quoted, so that {a: "b,c=d"} and {a: "b", c: "d"} differ.
func labelKey(labels map[string]string) string {
	names := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for _, k := range names {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
		b.WriteByte(',')
	}
	return b.String()
}

// drop forgets owner as a creator of metrics; a metric no live worker
// created goes, and a family left empty.
func (c *customMetrics) drop(owner *worker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, m := range c.byID {
		delete(m.owners, owner)
		if len(m.owners) == 0 {
			delete(c.byID, id)
			delete(m.family.metrics, m.key)
			if len(m.family.metrics) == 0 {
				delete(c.families, m.family.name)
			}
		}
	}
}

// Describe implements prometheus.Collector: the families vary, so none
// are described (an unchecked collector).
func (b *Backend) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (b *Backend) Collect(ch chan<- prometheus.Metric) {
	b.collectRestarts(ch)
	c := b.metrics
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.families {
		for _, m := range f.metrics {
			names := make([]string, 0, len(m.labels))
			for k := range m.labels {
				names = append(names, k)
			}
			slices.Sort(names)
			vals := make([]string, len(names))
			for i, k := range names {
				vals[i] = m.labels[k]
			}
			desc := prometheus.NewDesc(f.name, f.help, names, nil)
			var metric prometheus.Metric
			var err error
			switch f.kind {
			case kindCounter:
				metric, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, m.value, vals...)
			case kindGauge:
				metric, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.value, vals...)
			default:
				cum := map[float64]uint64{}
				var total uint64
				for i, ub := range m.buckets {
					total += m.counts[i]
					cum[ub] = total
				}
				metric, err = prometheus.NewConstHistogram(desc, m.count, m.sum, cum, vals...)
			}
			if err == nil {
				ch <- metric
			}
		}
	}
}
