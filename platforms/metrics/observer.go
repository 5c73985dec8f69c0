package metrics

import (
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferd/inferd/core"
)

// firstResponseFamily is the only family a model's model_metrics may tune.
const firstResponseFamily = "nv_inference_first_response_histogram_ms"

// defaultFirstResponseBuckets are Triton's first-response bounds (ms).
func defaultFirstResponseBuckets() []float64 { return []float64{100, 500, 2000, 5000} }

// The summaries, in core.RequestDurations order. HELP texts follow Triton's
// wording, except that Triton calls the compute ones "Cumulative".
var summaryFamilies = [...]struct{ name, help string }{
	{"nv_inference_request_summary_us", "Summary of inference request duration in microseconds (includes cached requests)"},
	{"nv_inference_queue_summary_us", "Summary of inference queuing duration in microseconds (includes cached requests)"},
	{"nv_inference_compute_input_summary_us", "Summary of compute input duration in microseconds (does not include cached requests)"},
	{"nv_inference_compute_infer_summary_us", "Summary of compute inference duration in microseconds (does not include cached requests)"},
	{"nv_inference_compute_output_summary_us", "Summary of compute output duration in microseconds (does not include cached requests)"},
}

const firstResponseHelp = "Duration from request to first response in milliseconds"

// Observers returns the factory core.Options.Observers wants, or nil when
// neither summaries nor the histogram are on, so the core pays nothing.
// log receives the skipped summary_quantiles pairs (once, now) and the
// model_metrics warnings (at each load); nil means slog.Default().
func (c Config) Observers(log *slog.Logger) core.ObserverFactory {
	if log == nil {
		log = slog.Default()
	}
	for _, pair := range c.badQuantiles {
		log.Error("--metrics-config summary_quantiles: skipping a pair that is not <quantile>:<error>", "pair", pair)
	}
	if !c.SummaryLatencies && !c.HistogramLatencies {
		return nil
	}
	return func(mv *core.ModelVersion) core.Observer { return newObserver(mv, c, log) }
}

// observer holds one model version's summaries and histogram. The
// collector finds it through mv.Stats.Observer(), so its series exist
// exactly while the version is ready.
type observer struct {
	summaries     []prometheus.Summary // RequestDurations order; nil when off
	firstResponse prometheus.Histogram // nil when off
	cache         *cacheSummaries      // nil unless summaries are on and the version caches
}

func newObserver(mv *core.ModelVersion, c Config, log *slog.Logger) *observer {
	names, values := versionLabels(mv)
	labels := prometheus.Labels{}
	for i, n := range names {
		labels[n] = values[i]
	}
	o := &observer{}
	if c.SummaryLatencies {
		for _, f := range summaryFamilies {
			o.summaries = append(o.summaries, c.newSummary(f.name, f.help, labels))
		}
	}
	if c.SummaryLatencies && mv.CacheEnabled() {
		o.cache = newCacheSummaries(c, labels)
	}
	if c.HistogramLatencies {
		o.firstResponse = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: firstResponseFamily, Help: firstResponseHelp, ConstLabels: labels,
			Buckets: firstResponseBuckets(mv, log),
		})
	}
	return o
}

// newSummary is one per-version summary with the configured quantiles.
func (c Config) newSummary(name, help string, labels prometheus.Labels) prometheus.Summary {
	return prometheus.NewSummary(prometheus.SummaryOpts{
		Name: name, Help: help, ConstLabels: labels,
		Objectives: c.SummaryQuantiles,
		// prometheus-cpp's window, which Triton uses.
		MaxAge: 60 * time.Second, AgeBuckets: 5,
	})
}

// firstResponseBuckets reads the model's model_metrics override.
func firstResponseBuckets(mv *core.ModelVersion, log *slog.Logger) []float64 {
	buckets := defaultFirstResponseBuckets()
	for _, mc := range mv.Config.GetModelMetrics().GetMetricControl() {
		family := mc.GetMetricIdentifier().GetFamily()
		if family != firstResponseFamily {
			log.Warn("model_metrics: only "+firstResponseFamily+" can be customised; ignoring", "model", mv.Name, "version", mv.Version, "family", family)
			continue
		}
		buckets = mc.GetHistogramOptions().GetBuckets()
	}
	// prometheus panics on unordered or repeated bounds (the config only
	// checks they are non-empty), so order them and drop NaN and repeats.
	clean := slices.DeleteFunc(slices.Clone(buckets), math.IsNaN)
	slices.Sort(clean)
	clean = slices.Compact(clean)
	if len(clean) == 0 {
		// An empty list would get prometheus' own defaults instead.
		return defaultFirstResponseBuckets()
	}
	if !slices.Equal(clean, buckets) {
		log.Warn("model_metrics: histogram buckets must be ascending numbers without repeats; using them sorted", "model", mv.Name, "version", mv.Version, "buckets", clean)
	}
	return clean
}

func (o *observer) ObserveSuccess(d core.RequestDurations) {
	if o.summaries == nil {
		return
	}
	for i, v := range [...]uint64{d.RequestUs, d.QueueUs, d.ComputeInputUs, d.ComputeInferUs, d.ComputeOutputUs} {
		o.summaries[i].Observe(float64(v))
	}
}

func (o *observer) ObserveFirstResponse(ms uint64) {
	if o.firstResponse != nil {
		o.firstResponse.Observe(float64(ms))
	}
}

func (o *observer) collect(ch chan<- prometheus.Metric) {
	for _, s := range o.summaries {
		s.Collect(ch)
	}
	if o.firstResponse != nil {
		o.firstResponse.Collect(ch)
	}
	if o.cache != nil {
		o.cache.hit.Collect(ch)
		o.cache.miss.Collect(ch)
	}
}
