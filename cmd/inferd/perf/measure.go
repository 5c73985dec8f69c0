package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// errUnstable ends a run whose first setting did not settle, in
// perf_analyzer's words.
var errUnstable = verbatimError("Failed to obtain stable measurement.")

// verbatimError is an error whose text is another tool's, kept as it is
// so that scripts matching that tool's output keep working.
type verbatimError string

func (e verbatimError) Error() string { return string(e) }

// errAllFailed is wrapped by the error that ends a run in which no request
// of a window succeeded.
var errAllFailed = errors.New("every request failed")

// stabilityWindows is how many recent windows must agree, as in
// perf_analyzer.
const stabilityWindows = 3

// window is one measurement interval's client-side view.
type window struct {
	dur     time.Duration
	lats    []int64 // latencies of successful requests, ns, sorted
	ok      int
	errs    int
	late    int
	lastErr string
	stats   *statsSnapshot // server statistics at the window's end; nil if unavailable
	// sendNS and recvNS sum the client's own time on successful requests.
	sendNS, recvNS int64
}

func (w *window) throughput(batch int) float64 {
	if w.dur <= 0 {
		return 0
	}
	return float64(w.ok*batch) / w.dur.Seconds()
}

// latency is the figure stability is judged on: the average when
// percentile is 0, else that percentile (ns).
func (w *window) latency(percentile int) float64 {
	if percentile == 0 {
		return mean(w.lats)
	}
	return float64(percentileOf(w.lats, float64(percentile)))
}

// percentileOf is perf_analyzer's percentile of sorted values: the value
// at index p/100·(n-1), rounded half up (triton-inference-server/perf_analyzer
// src/inference_profiler.cc, Summarize).
func percentileOf(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted)-1) + 0.5)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// reportedPercentiles is perf_analyzer's set, in order: 50, 90, 95 and 99,
// with --percentile's added (0: none).
func reportedPercentiles(extra int) []int {
	ps := []int{50, 90, 95, 99}
	if extra > 0 && !slices.Contains(ps, extra) {
		ps = append(ps, extra)
		slices.Sort(ps)
	}
	return ps
}

// stdDev is the population standard deviation, as perf_analyzer's.
func stdDev(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	m := mean(v)
	var sum float64
	for _, x := range v {
		d := float64(x) - m
		sum += d * d
	}
	return math.Sqrt(sum / float64(len(v)))
}

func mean(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	return sum / float64(len(v))
}

// stable applies perf_analyzer's rule (triton-inference-server/perf_analyzer
// src/inference_profiler.cc, DetermineStability): over the last three
// windows, the largest throughput is within 1+threshold of the smallest,
// and so is the largest latency of the smallest when latency is checked.
// A window without throughput is never stable.
func stable(tput, lat []float64, threshold float64, checkLatency bool) bool {
	if len(tput) < stabilityWindows || len(lat) < stabilityWindows {
		return false
	}
	series := [][]float64{tput[len(tput)-stabilityWindows:]}
	if checkLatency {
		series = append(series, lat[len(lat)-stabilityWindows:])
	}
	for _, t := range series[0] {
		if t <= 0 {
			return false
		}
	}
	for _, v := range series {
		lo, hi := slices.Min(v), slices.Max(v)
		if lo <= 0 || hi/lo > 1+threshold+1e-9 { // 1e-9: 110 vs 100 is within 10%, whatever the rounding
			return false
		}
	}
	return true
}

// result is the report of one concurrency or request-rate setting: the
// last three windows merged.
type result struct {
	Concurrency int     `json:"concurrency,omitempty"`
	RequestRate float64 `json:"request_rate,omitempty"`
	Throughput  float64 `json:"throughput_infer_per_sec"`
	// TextsPerSec is the embeddings mode's throughput in texts: requests
	// a second times --batch-size-text.
	TextsPerSec float64 `json:"throughput_texts_per_sec,omitempty"`
	P50         float64 `json:"p50_latency_us"`
	P90         float64 `json:"p90_latency_us"`
	P95         float64 `json:"p95_latency_us"`
	P99         float64 `json:"p99_latency_us"`
	// P999 and Max are not perf_analyzer's: the tail at many connections
	// (BENCHMARKS.md "Tail latency") is decided past p99.
	P999   float64 `json:"p999_latency_us"`
	Max    float64 `json:"max_latency_us"`
	Avg    float64 `json:"avg_latency_us"`
	StdDev float64 `json:"std_latency_us"`
	// Percentiles are perf_analyzer's reported set: p50, p90, p95, p99
	// and --percentile's (µs).
	Percentiles map[int]float64 `json:"percentiles_us"`
	// ClientSendUS and ClientRecvUS are the client's own average time
	// writing a request and reading its answer (HTTP only; 0 over gRPC).
	ClientSendUS float64 `json:"client_send_us"`
	ClientRecvUS float64 `json:"client_recv_us"`
	// StabilityLatency is the latency stability was judged on (the
	// average, or --percentile).
	StabilityLatency float64 `json:"stability_latency_us"`
	Requests         int     `json:"requests"`
	Errors           int     `json:"errors"`
	Delayed          int     `json:"delayed_requests"`
	Stable           bool    `json:"stable"`
	// OverLatencyThreshold marks the setting that ended a sweep by going
	// over --latency-threshold.
	OverLatencyThreshold bool         `json:"over_latency_threshold,omitempty"`
	Windows              int          `json:"windows"`
	Server               *serverSplit `json:"server,omitempty"`
	LastError            string       `json:"last_error,omitempty"`
}

// merge sums windows into a result; before is the server snapshot taken
// when the first of them began.
func merge(ws []*window, before *statsSnapshot, batch, percentile int) result {
	var r result
	var dur time.Duration
	var lats []int64
	var sendNS, recvNS int64
	for _, w := range ws {
		dur += w.dur
		sendNS += w.sendNS
		recvNS += w.recvNS
		lats = append(lats, w.lats...)
		r.Requests += w.ok + w.errs
		r.Errors += w.errs
		r.Delayed += w.late
		if w.lastErr != "" {
			r.LastError = w.lastErr
		}
	}
	slices.Sort(lats)
	ok := len(lats)
	if dur > 0 {
		r.Throughput = float64(ok*batch) / dur.Seconds()
	}
	us := func(ns float64) float64 { return math.Round(ns/10) / 100 } // µs, two decimals
	r.P50 = us(float64(percentileOf(lats, 50)))
	r.P90 = us(float64(percentileOf(lats, 90)))
	r.P95 = us(float64(percentileOf(lats, 95)))
	r.P99 = us(float64(percentileOf(lats, 99)))
	r.P999 = us(float64(percentileOf(lats, 99.9)))
	if ok > 0 {
		r.Max = us(float64(lats[ok-1]))
	}
	r.Avg = us(mean(lats))
	r.StdDev = us(stdDev(lats))
	r.Percentiles = map[int]float64{}
	for _, p := range reportedPercentiles(percentile) {
		r.Percentiles[p] = us(float64(percentileOf(lats, float64(p))))
	}
	if ok > 0 {
		r.ClientSendUS = us(float64(sendNS) / float64(ok))
		r.ClientRecvUS = us(float64(recvNS) / float64(ok))
	}
	r.StabilityLatency = r.Avg
	if percentile > 0 {
		r.StabilityLatency = r.Percentiles[percentile]
	}
	if last := ws[len(ws)-1].stats; before != nil && last != nil {
		r.Server = split(*before, *last)
	}
	return r
}

// measurer runs the measurement windows of one setting.
type measurer struct {
	opts     *options
	sender   *sender
	progress *progress
	warn     func(string)
	passes   io.Writer // -v: perf_analyzer's line for each window; nil: none
	// model is the model measured, composing an ensemble's models, whose
	// statistics are read with it.
	model     modelRef
	composing []modelRef
	statsOff  bool // the server gave no statistics; stop asking
}

func (m *measurer) snapshot(ctx context.Context) *statsSnapshot {
	if m.statsOff {
		return nil
	}
	s, err := m.sender.proto.stats(ctx, m.model)
	for _, ref := range m.composing {
		if err != nil {
			break
		}
		var c statsSnapshot
		c, err = m.sender.proto.stats(ctx, ref)
		s.composing = append(s.composing, c)
	}
	if err != nil {
		if ctx.Err() == nil {
			m.statsOff = true
			m.warn(fmt.Sprintf("no server-side split: %v", err))
		}
		return nil
	}
	return &s
}

// measure repeats windows until the last three agree or max trials pass.
// label names the setting in progress lines.
func (m *measurer) measure(ctx context.Context, start func(context.Context) load, label string) (result, error) {
	rec := newRecorder()
	m.sender.rec = rec
	l := start(ctx)
	defer l.stop()

	var (
		ws         []*window
		snaps      []*statsSnapshot // snaps[i] is taken when window i begins
		tput, lat  []float64
		buf, carry []record
		batch      = m.opts.batch
		isStable   bool
	)
	if err := m.warmUp(ctx, rec); err != nil {
		return result{}, err
	}
	snaps = append(snaps, m.snapshot(ctx))
	windowStart := rec.now()
	for trial := 1; trial <= m.opts.maxTrials; trial++ {
		if err := m.wait(ctx, rec); err != nil {
			return result{}, err
		}
		end := rec.now()
		snaps = append(snaps, m.snapshot(ctx))

		var lastErr string
		buf, lastErr = rec.drain(append(buf[:0], carry...))
		carry = carry[:0]
		if n := m.opts.benchRequests; n > 0 {
			// --request-count: the window ends with its n-th request, as
			// perf_analyzer clamps it.
			end = min(end, nthEnd(buf, windowStart, n)+1)
		}
		w := &window{dur: time.Duration(end - windowStart), lastErr: lastErr, stats: snaps[len(snaps)-1]}
		// A request belongs to the window it ended in; one that ended
		// after the window closed waits for the next.
		for _, r := range buf {
			switch {
			case r.end >= end:
				carry = append(carry, r)
			case r.end < windowStart:
				// ended before this window (cannot happen after the first)
			case r.ok:
				w.ok++
				w.lats = append(w.lats, r.end-r.start)
				w.sendNS += int64(r.io.send)
				w.recvNS += int64(r.io.recv)
			default:
				w.errs++
			}
			if r.end >= windowStart && r.end < end && r.late {
				w.late++
			}
		}
		slices.Sort(w.lats)
		windowStart = end
		ws = append(ws, w)
		tput = append(tput, w.throughput(batch))
		lat = append(lat, w.latency(m.opts.percentile))

		if w.ok == 0 && w.errs > 0 {
			return result{}, fmt.Errorf("%s: %w: %s", label, errAllFailed, w.lastErr)
		}
		// A counted run is one window, taken as it is (perf_analyzer's
		// ProfileHelper).
		isStable = m.opts.benchRequests > 0 || stable(tput, lat, m.opts.stability, true)
		line := fmt.Sprintf("%s: window %d/%d: %.1f infer/s, %s latency %.0f µs, %d errors",
			label, trial, m.opts.maxTrials, tput[len(tput)-1], latencyName(m.opts.percentile), lat[len(lat)-1]/1000, w.errs)
		if isStable {
			line += ", stable"
		}
		if m.passes != nil { // -v: perf_analyzer's lines take the progress line's place
			writePass(m.passes, trial, w, m.opts.percentile, batch)
		} else {
			m.progress.update(line)
		}
		if isStable {
			break
		}
	}
	// perf_analyzer in async mode takes a setting whose latency never
	// settled once its throughput did, and says so.
	if !isStable && m.opts.async && stable(tput, lat, m.opts.stability, false) {
		m.warn(label + ": Request latency is not stabilizing. Please try lowering the request rate.")
		isStable = true
	}
	n := min(stabilityWindows, len(ws))
	r := merge(ws[len(ws)-n:], snaps[len(snaps)-1-n], batch, m.opts.percentile)
	r.Stable = isStable
	r.Windows = len(ws)
	return r, nil
}

// warmUp lets --warmup-request-count requests finish before measuring and
// forgets them.
func (m *measurer) warmUp(ctx context.Context, rec *recorder) error {
	for rec.finished.Load() < int64(m.opts.warmupRequests) {
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	if m.opts.warmupRequests > 0 {
		rec.drain(nil)
	}
	return nil
}

// nthEnd is when the n-th request that ended at or after start ended (the
// last one's end when fewer did).
func nthEnd(recs []record, start int64, n int) int64 {
	ends := make([]int64, 0, len(recs))
	for _, r := range recs {
		if r.end >= start {
			ends = append(ends, r.end)
		}
	}
	if len(ends) == 0 {
		return start
	}
	slices.Sort(ends)
	return ends[min(n, len(ends))-1]
}

// wait blocks until the current window ends: after --measurement-interval,
// or in count_windows mode at the first whole second by which
// --measurement-request-count requests have finished in it, as
// perf_analyzer checks once a second.
func (m *measurer) wait(ctx context.Context, rec *recorder) error {
	from := rec.finished.Load()
	if n := m.opts.benchRequests; n > 0 { // --request-count
		for rec.finished.Load()-from < int64(n) {
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
		}
		return nil
	}
	if !m.opts.countWindows {
		return sleep(ctx, m.opts.interval)
	}
	for {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		if rec.finished.Load()-from >= int64(m.opts.requestCount) {
			return nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writePass is perf_analyzer's -v line for one window
// (triton-inference-server/perf_analyzer src/inference_profiler.cc,
// ProfileHelper).
func writePass(out io.Writer, trial int, w *window, percentile, batch int) {
	fmt.Fprintf(out, "  Pass [%d] throughput: %s infer/sec. ", trial, cppDouble(w.throughput(batch)))
	if percentile > 0 {
		fmt.Fprintf(out, "p%d latency: %d usec\n", percentile, percentileOf(w.lats, float64(percentile))/1000)
		return
	}
	fmt.Fprintf(out, "Avg latency: %d usec (std %d usec). \n", int64(mean(w.lats))/1000, int64(stdDev(w.lats))/1000)
}

func latencyName(percentile int) string {
	if percentile == 0 {
		return "avg"
	}
	return fmt.Sprintf("p%d", percentile)
}

// label names the setting of a result in messages.
func (r result) label() string {
	if r.RequestRate > 0 {
		return "request rate " + strconv.FormatFloat(r.RequestRate, 'g', -1, 64)
	}
	return "concurrency " + strconv.Itoa(r.Concurrency)
}
