// Package metrics serves Triton's Prometheus metrics (nv_inference_* ...)
// from the inference core's per-version statistics, so /metrics and the
// statistics endpoint always agree, and polls the CPU (nv_cpu_*), GPU
// (nv_gpu_*, through NVML) and pinned-memory (nv_pinned_memory_pool_*)
// gauges.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/inferd/inferd/core"
)

// Config is what --metrics-config sets, plus the polled metrics' flags.
type Config struct {
	// CounterLatencies keeps the *_duration_us counters (on unless "false").
	CounterLatencies bool
	// SummaryLatencies adds the *_summary_us families (off unless "true").
	SummaryLatencies bool
	// SummaryQuantiles are the summaries' objectives: quantile → allowed
	// error. Replaced, never mutated, so copies of a Config may share it.
	SummaryQuantiles map[float64]float64
	// HistogramLatencies adds nv_inference_first_response_histogram_ms
	// (off unless "true").
	HistogramLatencies bool

	// AllowCPU is --allow-cpu-metrics, which the caller ANDs with
	// --allow-metrics: the nv_cpu_* families (Linux only), and Run polls.
	AllowCPU bool
	// AllowGPU is --allow-gpu-metrics, ANDed likewise: the nv_gpu_* and
	// nv_energy_consumption families of the visible GPUs, read through
	// NVML (absent, with a warning from Run, when NVML cannot start). As in
	// Triton, the flag alone makes Run poll, which sets the pinned-memory
	// gauges.
	AllowGPU bool
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES (nil: unset): which GPUs
	// are reported.
	CUDAVisibleDevices *string
	// CPUOnly is TRITON_SERVER_CPU_ONLY being set: no GPU metrics whatever
	// AllowGPU says.
	CPUOnly bool
	// gpus opens the GPUs; nil means NVML. Tests fake the devices.
	gpus gpuOpener
	// Interval is --metrics-interval-ms; Run polls every Interval/2.
	Interval time.Duration
	// PinnedPoolBytes is --pinned-memory-pool-byte-size, the value of
	// nv_pinned_memory_pool_total_bytes once polled.
	PinnedPoolBytes int64
	// procRoot holds proc/stat and proc/meminfo; "" means "/". Tests
	// point it at testdata.
	procRoot string

	// badQuantiles are the summary_quantiles pairs that were skipped;
	// Observers logs them, as ParseSetting has no logger.
	badQuantiles []string
}

// DefaultConfig is Triton's default.
func DefaultConfig() Config {
	return Config{CounterLatencies: true, SummaryQuantiles: defaultQuantiles(),
		AllowCPU: true, AllowGPU: true, Interval: DefaultInterval, PinnedPoolBytes: DefaultPinnedPoolBytes}
}

func defaultQuantiles() map[float64]float64 {
	return map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.95: 0.001, 0.99: 0.001, 0.999: 0.001}
}

// ParseSetting applies one --metrics-config "<setting>=<value>". Unknown
// settings are ignored, as in Triton; a malformed one is a usage error.
// Boolean settings compare the literal string, as Triton does.
func (c *Config) ParseSetting(arg string) error {
	key, value, ok := strings.Cut(arg, "=")
	if !ok || key == "" || value == "" || strings.Contains(key, ",") {
		return fmt.Errorf("--metrics-config expects <setting>=<value>, got %q", arg)
	}
	switch key {
	case "counter_latencies":
		c.CounterLatencies = value != "false"
	case "summary_latencies":
		c.SummaryLatencies = value == "true"
	case "histogram_latencies":
		c.HistogramLatencies = value == "true"
	case "summary_quantiles":
		c.SummaryQuantiles, c.badQuantiles = parseQuantiles(value)
	}
	return nil
}

// parseQuantiles reads "<quantile>:<error>,...". Bad pairs are skipped
// rather than failing the start-up (Triton logs them); when none is left
// the default objectives apply.
func parseQuantiles(value string) (map[float64]float64, []string) {
	out := map[float64]float64{}
	var bad []string
	for pair := range strings.SplitSeq(value, ",") {
		qs, es, ok := strings.Cut(pair, ":")
		q, qerr := strconv.ParseFloat(strings.TrimSpace(qs), 64)
		e, eerr := strconv.ParseFloat(strings.TrimSpace(es), 64)
		// Out-of-range values would make the quantile estimator meaningless.
		if !ok || qerr != nil || eerr != nil || !(q >= 0 && q <= 1) || !(e >= 0 && e <= 1) {
			bad = append(bad, pair)
			continue
		}
		out[q] = e
	}
	if len(out) == 0 {
		return defaultQuantiles(), bad
	}
	return out, bad
}

// Source is what the collector reads: the serving model versions.
type Source interface {
	ReadyVersions(name string) []*core.ModelVersion
}

// Handler serves GET /metrics (and /metrics/).
type Handler struct {
	reg *prometheus.Registry
	sys *system
}

// NewHandler builds the metrics endpoint over src. With cfg.AllowCPU on
// Linux it reads /proc/stat, the baseline of the first CPU utilisation.
// extra are exported beside (backends' own metrics, such as Python
// models' custom ones).
func NewHandler(src Source, cfg Config, extra ...prometheus.Collector) *Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{src: src, cfg: cfg})
	for _, c := range extra {
		reg.MustRegister(c)
	}
	return &Handler{reg: reg, sys: newSystem(reg, cfg)}
}

// Run refreshes the polled gauges (pinned memory, CPU, GPU) every
// cfg.Interval/2 until ctx ends, as Triton's polling thread does; until
// the first poll they read 0. It returns at once when neither AllowCPU nor
// AllowGPU is set. log gets /proc read failures; nil means slog.Default().
func (h *Handler) Run(ctx context.Context, log *slog.Logger) {
	h.sys.run(ctx, log)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" && r.URL.Path != "/metrics/" {
		// Triton answers 200 with an empty body here; nothing scrapes other
		// paths, and a 404 tells a misconfigured scraper the truth.
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	families, err := h.reg.Gather()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return
		}
	}
}

type family struct {
	name, help string
	kind       prometheus.ValueType
}

var (
	famSuccess = family{"nv_inference_request_success", "Number of successful inference requests, all batch sizes", prometheus.CounterValue}
	famFailure = family{"nv_inference_request_failure", "Number of failed inference requests, all batch sizes", prometheus.CounterValue}
	famCount   = family{"nv_inference_count", "Number of inferences performed (a batch of n counts n)", prometheus.CounterValue}
	famExec    = family{"nv_inference_exec_count", "Number of model executions performed (a dynamic batch counts 1)", prometheus.CounterValue}
	famPending = family{"nv_inference_pending_request_count", "Instantaneous number of requests waiting to execute", prometheus.GaugeValue}
	// famRunning is inferd's own (docs/metrics.md): Triton has no gauge
	// of the requests executing now, which scalers and endpoint pickers
	// read beside the queue.
	famRunning = family{"inferd_inference_running_request_count", "Instantaneous number of requests executing now (taken by an instance, not yet finished)", prometheus.GaugeValue}
	// The autopilot's (docs/autopilot.md), for autoscalers: the rate a
	// version with a latency target could serve within it at the settings
	// in force, and 1 - its measured rate ÷ that.
	famCapacity = family{"inferd_model_capacity_infer_per_second", "Inferences per second the model version could serve within its latency target at its current batching, estimated from measured execution costs", prometheus.GaugeValue}
	famHeadroom = family{"inferd_model_slo_headroom_ratio", "1 - the measured inference rate / inferd_model_capacity_infer_per_second", prometheus.GaugeValue}
	famLoad     = family{"nv_model_load_duration_secs", "Time taken to load the model version, in seconds", prometheus.GaugeValue}
	famRequest  = family{"nv_inference_request_duration_us", "Cumulative inference request duration in microseconds", prometheus.CounterValue}
	famQueue    = family{"nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds", prometheus.CounterValue}
	famCompIn   = family{"nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds", prometheus.CounterValue}
	famCompInf  = family{"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds", prometheus.CounterValue}
	famCompOut  = family{"nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds", prometheus.CounterValue}
	// famStart is inferd's own (docs/metrics.md): Triton logs no
	// per-instance start time, which says what a warm start (a shared
	// session, a forked worker) saves.
	famStart = family{"inferd_model_instance_start_duration_secs", "Time taken to start the model instance (its backend's creation of it), in seconds", prometheus.GaugeValue}
)

// collector emits const metrics per model version at scrape time; label
// sets differ between models (metric_tags add `_<key>` labels), which a
// fixed *Vec cannot express.
type collector struct {
	src Source
	cfg Config
}

// Describe sends nothing: an unchecked collector, since label sets change
// with the loaded models.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, mv := range c.src.ReadyVersions("") {
		st := mv.MetricsSnapshot()
		names, values := versionLabels(mv)
		emit := func(f family, v float64, extraName, extraValue string) {
			n, vals := names, values
			if extraName != "" {
				n = append(append([]string(nil), names...), extraName)
				vals = append(append([]string(nil), values...), extraValue)
			}
			desc := prometheus.NewDesc(f.name, f.help, n, nil)
			ch <- prometheus.MustNewConstMetric(desc, f.kind, v, vals...)
		}
		emit(famSuccess, float64(st.Success.Count), "", "")
		for _, r := range core.FailureReasons {
			emit(famFailure, float64(st.Failures[r]), "reason", r.String())
		}
		emit(famCount, float64(st.InferenceCount), "", "")
		emit(famExec, float64(st.ExecutionCount), "", "")
		emit(famPending, float64(st.Pending), "", "")
		emit(famRunning, float64(st.Running), "", "")
		emit(famLoad, st.LoadSeconds, "", "")
		if r, ok := mv.SLO(); ok && r.CapacityPerSec > 0 {
			emit(famCapacity, r.CapacityPerSec, "", "")
			emit(famHeadroom, r.Headroom, "", "")
		}
		for _, is := range mv.InstanceStarts() {
			emit(famStart, is.Duration.Seconds(), "instance", is.Instance)
		}
		if c.cfg.CounterLatencies {
			emit(famRequest, float64(st.RequestUs), "", "")
			emit(famQueue, float64(st.QueueUs), "", "")
			emit(famCompIn, float64(st.ComputeInputUs), "", "")
			emit(famCompInf, float64(st.ComputeInferUs), "", "")
			emit(famCompOut, float64(st.ComputeOutputUs), "", "")
		}
		if mv.CacheEnabled() {
			emitCache(emit, st)
		}
		// Summaries and the histogram live in the version's observer, so
		// they come and go with the version like the series above.
		if o, ok := core.ObserverAs[*observer](mv.Stats.Observer()); ok {
			o.collect(ch)
		}
	}
}

// versionLabels are the labels of every per-version series: model, version
// and one `_<key>` per metric_tags entry, and the model's namespace with
// --model-namespacing (triton-inference-server/core
// src/metric_model_reporter.cc, GetMetricLabels).
func versionLabels(mv *core.ModelVersion) (names, values []string) {
	names = []string{"model", "version"}
	values = []string{mv.Name, strconv.FormatInt(mv.Version, 10)}
	if mv.Namespace != "" {
		names = append(names, "namespace")
		values = append(values, mv.Namespace)
	}
	for k, v := range mv.Config.GetMetricTags() {
		names = append(names, "_"+k)
		values = append(values, v)
	}
	return names, values
}
