// Package orca builds ORCA endpoint load reports (the xds OrcaLoadReport
// that Envoy and gRPC load balancers read) for the HTTP and gRPC APIs.
//
// Triton reports only the KV-cache figures of TensorRT-LLM on /generate and
// /generate_stream (triton-inference-server/server src/orca_http.cc); this
// package does that byte for
// byte, and for any model on /infer (and the platform routes built on it)
// and gRPC it reports the standard fields too: the process's CPU and
// memory utilisation, the model's busy fraction of its instances, its
// requests and errors per second, and named metrics (queue size,
// instance utilisation, batch fill, and the KV-cache figures when a model
// exports them).
//
// On HTTP a report is computed only for a request that asks for one; the
// others pay a header-map lookup. On gRPC every ModelInfer call carries
// the binary report in its trailer (grpc-go's weighted_round_robin reads
// it there, and gRPC clients never ask), reused for 100 ms per model; and
// the out-of-band service (Service) streams the process's report.
package orca

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	xds "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
)

// Header names. Go's server hands request headers over canonicalised;
// responses keep Triton's lower-case names (map keys set directly).
const (
	// RequestHeader asks for a report: "text" or "json".
	RequestHeader = "endpoint-load-metrics-format"
	// Header carries the report in the asked format.
	Header = "endpoint-load-metrics"
	// BinHeader carries the report as base64 protobuf, which Envoy reads
	// in preference to Header.
	BinHeader = "endpoint-load-metrics-bin"

	canonicalRequestHeader = "Endpoint-Load-Metrics-Format"
)

// Named metrics of a report.
const (
	KVUtilization    = "kv_cache_utilization"
	KVTokenCapacity  = "max_token_capacity"
	QueueSize        = "queue_size"
	InstanceUtil     = "instance_utilization"
	BatchFill        = "batch_fill"
	kvFamily         = "nv_trt_llm_kv_cache_block_metrics"
	kvBlockTypeLabel = "kv_cache_block_type"
)

// Options configure a Reporter.
type Options struct {
	// Metrics is where the KV-cache family is read
	// (nv_trt_llm_kv_cache_block_metrics, which a backend's custom metrics
	// export); nil: metrics are off, and no report carries KV figures.
	Metrics prometheus.Gatherer
	// Logger gets the refused header values; nil: slog.Default().
	Logger *slog.Logger
	// TrailerOnlyWhenAsked restricts the gRPC trailer to calls whose
	// metadata carries endpoint-load-metrics-format (Envoy's way of
	// asking); false: every call carries it.
	TrailerOnlyWhenAsked bool

	// root is where proc and sys are read ("/" unless a test says).
	root string
	// kvCache is how long the KV-cache figures are reused: 0 is kvCache's
	// default, below 0 reads the family for every report (tests that
	// change it between requests).
	kvCache time.Duration
	// callCache is how long a model's trailer is reused: 0 is callCache's
	// default, below 0 computes it for every call.
	callCache time.Duration
}

// Reporter computes load reports. Safe for concurrent use.
type Reporter struct {
	metrics prometheus.Gatherer
	log     *slog.Logger
	proc    *process

	// The KV-cache figures, reused for kvTTL: reading them gathers every
	// custom metric family, and behind Envoy's weighted round robin every
	// request asks for a report. kvLast is read without a lock; kvMu lets
	// one report at a time gather when it is stale.
	kvTTL  time.Duration
	kvMu   sync.Mutex
	kvLast atomic.Pointer[kvFigures]

	// Each model version's trailer, reused for callTTL: every gRPC call
	// carries one. Entries of versions not reported on for a minute go
	// (unloaded ones).
	onlyAsked bool
	callTTL   time.Duration
	calls     sync.Map // *core.ModelVersion -> *callTrailer
}

// callTrailer is a model version's trailer computed at one time.
type callTrailer struct {
	at time.Time
	md metadata.MD
}

// kvFigures are the KV-cache figures read at one time.
type kvFigures struct {
	at       time.Time
	util     float64
	capacity uint64
	ok       bool
}

// kvCache is how long KV-cache figures are reused, as the process's
// figures (procCache).
const kvCache = 100 * time.Millisecond

// callCache is how long a model's per-call report is reused.
const callCache = 100 * time.Millisecond

// callForget is how long a model's per-call report is kept unused.
const callForget = time.Minute

// New returns a Reporter. It takes the process's first CPU sample now, so
// that the first report's CPU figure covers the time since.
func New(opts Options) *Reporter {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.root == "" {
		opts.root = "/"
	}
	if opts.kvCache == 0 {
		opts.kvCache = kvCache
	}
	if opts.callCache == 0 {
		opts.callCache = callCache
	}
	return &Reporter{metrics: opts.Metrics, log: opts.Logger, proc: newProcess(opts.root, time.Now()), kvTTL: opts.kvCache,
		onlyAsked: opts.TrailerOnlyWhenAsked, callTTL: opts.callCache}
}

// Report is mv's load report now: the standard fields and the named
// metrics (the KV-cache ones when the family exists).
func (r *Reporter) Report(mv *core.ModelVersion) *xds.OrcaLoadReport {
	u := mv.Utilization()
	now := time.Now()
	p := r.proc.figures(now)
	rep := &xds.OrcaLoadReport{
		CpuUtilization:         p.cpu,
		MemUtilization:         p.mem,
		ApplicationUtilization: u.Compute,
		RpsFractional:          u.RPS,
		Eps:                    u.EPS,
		NamedMetrics: map[string]float64{
			QueueSize: float64(u.Pending),
			BatchFill: u.BatchFill,
		},
	}
	if u.Instances > 0 {
		rep.NamedMetrics[InstanceUtil] = float64(u.Busy) / float64(u.Instances)
	}
	if util, capacity, ok := r.kv(now); ok {
		rep.NamedMetrics[KVUtilization] = util
		rep.NamedMetrics[KVTokenCapacity] = float64(capacity)
	}
	return rep
}

// kv is the KV-cache figures as of now: those read less than kvTTL
// before, else read afresh (gatherKV).
func (r *Reporter) kv(now time.Time) (util float64, capacity uint64, ok bool) {
	if r.metrics == nil {
		return 0, 0, false
	}
	if r.kvTTL < 0 {
		return r.gatherKV()
	}
	// Figures read after now (by a concurrent report) are fresh too.
	fresh := func(f *kvFigures) bool { return f != nil && now.Sub(f.at) < r.kvTTL }
	if f := r.kvLast.Load(); fresh(f) {
		return f.util, f.capacity, f.ok
	}
	r.kvMu.Lock()
	defer r.kvMu.Unlock()
	if f := r.kvLast.Load(); fresh(f) { // another report gathered meanwhile
		return f.util, f.capacity, f.ok
	}
	f := &kvFigures{at: now}
	f.util, f.capacity, f.ok = r.gatherKV()
	r.kvLast.Store(f)
	return f.util, f.capacity, f.ok
}

// gatherKV reads Triton's KV-cache figures: utilisation used/max (0 when
// max is 0) and capacity max × tokens_per, truncated. ok is false unless
// the family has all three series; with several, the last of each wins.
func (r *Reporter) gatherKV() (util float64, capacity uint64, ok bool) {
	families, err := r.metrics.Gather()
	if err != nil && len(families) == 0 {
		return 0, 0, false
	}
	var tokensPer, used, maxBlocks float64
	var have [3]bool
	for _, f := range families {
		if f.GetName() != kvFamily {
			continue
		}
		for _, m := range f.GetMetric() {
			v, valued := value(m)
			if !valued {
				continue
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() != kvBlockTypeLabel {
					continue
				}
				switch lp.GetValue() {
				case "tokens_per":
					tokensPer, have[0] = v, true
				case "used":
					used, have[1] = v, true
				case "max":
					maxBlocks, have[2] = v, true
				}
			}
		}
	}
	if !have[0] || !have[1] || !have[2] {
		return 0, 0, false
	}
	if maxBlocks != 0 {
		util = used / maxBlocks
	}
	if c := maxBlocks * tokensPer; c > 0 {
		capacity = uint64(c)
	}
	return util, capacity, true
}

// value is a gauge's, counter's or untyped sample's value.
func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// asked returns the requested format, or ok false when req asks for none
// or for one that is neither "text" nor "json" (logged, as Triton does).
// A request without the header costs one map lookup.
func (r *Reporter) asked(req http.Header) (Format, bool) {
	v, present := req[canonicalRequestHeader]
	if !present || len(v) == 0 {
		return 0, false
	}
	f, err := ParseFormat(v[0])
	if err != nil {
		r.log.Error("ignoring the "+RequestHeader+" request header", "err", err)
		return 0, false
	}
	return f, true
}

// SetHeaders sets mv's full report on out, in the format req asks for
// and in binary, when req asks for one (/infer and the routes built on
// it). It does nothing for a request that does not ask.
func (r *Reporter) SetHeaders(out, req http.Header, mv *core.ModelVersion) {
	f, ok := r.asked(req)
	if !ok {
		return
	}
	rep := r.Report(mv)
	out[Header] = []string{string(AppendReport(nil, f, rep))}
	r.setBinary(out, rep)
}

// setBinary sets BinHeader, or logs why it cannot.
func (r *Reporter) setBinary(out http.Header, rep *xds.OrcaLoadReport) {
	bin, err := Binary(rep)
	if err != nil {
		r.log.Error("no "+BinHeader+" header", "err", err)
		return
	}
	out[BinHeader] = []string{bin}
}

// SetGenerateHeaders is Triton's report on /generate and /generate_stream:
// the KV-cache figures in Triton's exact text, and nothing when the family
// is missing. The binary form of the same figures goes beside it, since
// Envoy reads that before the text.
func (r *Reporter) SetGenerateHeaders(out, req http.Header) {
	f, ok := r.asked(req)
	if !ok {
		return
	}
	util, capacity, ok := r.kv(time.Now())
	if !ok {
		return
	}
	out[Header] = []string{string(AppendKV(nil, f, util, capacity))}
	r.setBinary(out, &xds.OrcaLoadReport{NamedMetrics: map[string]float64{
		KVUtilization: util, KVTokenCapacity: float64(capacity)}})
}

// SetTrailer puts mv's report in the gRPC call's trailer: the
// OrcaLoadReport protobuf under endpoint-load-metrics-bin, where grpc-go's
// orca package finds it for the client's load balancer (DoneInfo's
// ServerLoad, which weighted_round_robin reads) and Envoy's
// client_side_weighted_round_robin too. Every call carries it unless
// TrailerOnlyWhenAsked, when only calls whose metadata carries
// endpoint-load-metrics-format (whatever its value) do. A model's report
// is reused for 100 ms, so a call mostly pays a map lookup. grpc-go's own
// server side (orca.CallMetricsServerOption) sends the same trailer but
// costs every call three allocations and a report of its own.
func (r *Reporter) SetTrailer(ctx context.Context, mv *core.ModelVersion) {
	if r.onlyAsked && len(metadata.ValueFromIncomingContext(ctx, RequestHeader)) == 0 {
		return
	}
	md, err := r.trailer(mv, time.Now())
	if err == nil {
		err = grpc.SetTrailer(ctx, md)
	}
	if err != nil {
		r.log.Error("no load report in the call's trailer", "err", err)
	}
}

// trailer is mv's trailer as of now: the one computed less than callTTL
// before, else a fresh one. The MD is shared by the calls that reuse it;
// grpc.SetTrailer copies it into the call's trailer.
func (r *Reporter) trailer(mv *core.ModelVersion, now time.Time) (metadata.MD, error) {
	if v, ok := r.calls.Load(mv); ok && r.callTTL > 0 {
		if c := v.(*callTrailer); now.Sub(c.at) < r.callTTL {
			return c.md, nil
		}
	}
	raw, err := proto.Marshal(r.Report(mv))
	if err != nil {
		return nil, fmt.Errorf("marshal load report: %w", err)
	}
	c := &callTrailer{at: now, md: metadata.MD{BinHeader: {string(raw)}}}
	r.calls.Store(mv, c)
	r.calls.Range(func(k, v any) bool {
		if now.Sub(v.(*callTrailer).at) > callForget {
			r.calls.Delete(k)
		}
		return true
	})
	return c.md, nil
}

// names returns m's keys in byte order, so that reports render the same
// way each time.
func names(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// process samples the process's CPU time and resident memory. Figures are
// reused for a short while, so reports on every request cost a few reads
// of /proc per second, not per request.
type process struct {
	root     string
	cpus     float64 // CPUs available to the process
	memLimit float64 // bytes: the cgroup limit, else the machine's memory

	mu         sync.Mutex
	base, next cpuSample
	last       time.Time
	cached     procFigures
}

type cpuSample struct {
	at  time.Time
	cpu time.Duration // user + system time of the process
}

type procFigures struct{ cpu, mem float64 }

// procCache is how long figures are reused.
const procCache = 100 * time.Millisecond

func newProcess(root string, now time.Time) *process {
	p := &process{root: root, cpus: availableCPUs(root), memLimit: memoryLimit(root)}
	first := cpuSample{at: now, cpu: processCPU()}
	p.base, p.next = first, first
	return p
}

// figures returns CPU utilisation (process CPU time over the window, per
// available CPU) and memory utilisation (resident set over the limit),
// windowed as core.ModelVersion.Utilization does.
func (p *process) figures(now time.Time) procFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() && now.Sub(p.last) < procCache {
		return p.cached
	}
	cur := cpuSample{at: now, cpu: processCPU()}
	var f procFigures
	if secs := now.Sub(p.base.at).Seconds(); secs > 0 && p.cpus > 0 && cur.cpu >= p.base.cpu {
		f.cpu = (cur.cpu - p.base.cpu).Seconds() / secs / p.cpus
	}
	if now.Sub(p.next.at) >= core.UtilizationWindow {
		p.base, p.next = p.next, cur
	}
	if rss := residentBytes(p.root); rss > 0 && p.memLimit > 0 {
		f.mem = min(rss/p.memLimit, 1)
	}
	p.last, p.cached = now, f
	return f
}

// formatFloat is strconv's shortest form, which Envoy's parser reads.
func formatFloat(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'g', -1, 64) }
