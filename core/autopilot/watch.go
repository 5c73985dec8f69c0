package autopilot

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/inferd/inferd/core"
)

// watch tunes one version: every period it reads the version's statistics
// and latency window, updates its cost model, decides and applies.
type watch struct {
	t     Target
	b     bounds
	stats *core.Stats
	win   *window
	tuner core.Tuner
	log   *slog.Logger
	keep  int
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}

	// The loop's own state: the window being measured began at from,
	// with the latency counts at seen and the statistics at last; a
	// window too thin to judge grows into the next periods (maxWindows).
	from  time.Time
	cpuAt cpuTimes // the CPU times at from (cpu.go)
	cpu   cpuBound // what the windows so far measured of it
	clock func() cpuTimes
	seen  [numBuckets]uint64
	last  core.StatsSnapshot
	prev  core.StatsSnapshot // the window's start, once last moved on
	costs costs
	gamma float64
	// small is what the last window with no queue delay said of its
	// batches (model.smallBatches), kept while a delay hides them.
	small bool
	// moved says the last period changed the setting: the window since
	// began under the old one.
	moved bool

	mu     sync.Mutex
	report core.SLOReport
	// onPeriod, when set, gets each decided period's figures (the
	// instance scaler, scaler.go); called outside mu.
	onPeriod func(figures)
}

func newWatch(t Target, b bounds, stats *core.Stats, w *window, tuner core.Tuner, log *slog.Logger, keep int) *watch {
	wt := &watch{t: t, b: b, stats: stats, win: w, tuner: tuner, log: log, keep: keep, clock: readCPU,
		stop: make(chan struct{}), done: make(chan struct{}), costs: costs{}, gamma: gammaInit}
	wt.report.TargetP99 = t.P99
	wt.report.BatchTuning = b.effective(tuner.Tuning())
	return wt
}

func (wt *watch) run() {
	defer close(wt.done)
	tick := time.NewTicker(wt.t.Period)
	defer tick.Stop()
	wt.last = wt.stats.Snapshot()
	wt.from = time.Now()
	wt.cpuAt = wt.clock()
	for {
		select {
		case <-wt.stop:
			return
		case now := <-tick.C:
			wt.period(now)
		}
	}
}

// Stop ends the watch (core.SLOWatch) and waits for its loop.
func (wt *watch) Stop() {
	wt.once.Do(func() { close(wt.stop) })
	<-wt.done
}

// Report is a copy of what the watch measured and decided.
func (wt *watch) Report() core.SLOReport {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	r := wt.report
	r.Preferred = slices.Clone(r.Preferred)
	r.Decisions = slices.Clone(r.Decisions)
	return r
}

// maxWindows is how many periods a thin window may grow to before it is
// judged as it is.
const maxWindows = 10

// period measures the window so far, decides and applies; a window with
// too few requests to read a p99 from is left to grow, unless its delay
// keeps batches from filling at all.
func (wt *watch) period(now time.Time) {
	wt.follow()
	counts, n := wt.win.since(&wt.seen)
	elapsed := now.Sub(wt.from)
	snap := wt.stats.Snapshot()
	rows := float64(snap.InferenceCount - wt.last.InferenceCount)
	rate := rows / elapsed.Seconds()
	tuning := wt.b.effective(wt.tuner.Tuning())
	cur := setting{tuning.Delay, slices.Max(tuning.Preferred), tuning.MaxBatch}
	thin := n < minRequests
	if thin && elapsed < maxWindows*wt.t.Period && (cur.delay == 0 || rate*cur.delay.Seconds() >= 1) {
		return
	}
	p99 := quantile(&counts, n, 0.99)
	advance(&wt.seen, &counts)
	deltas := batchDeltas(wt.last.Batches, snap.Batches, wt.tuner.Pipelined())
	wt.costs.add(deltas)
	var cb cpuBound
	if wt.b.threads > 0 {
		cpuNow := wt.clock()
		var execNs float64
		for _, d := range deltas {
			execNs += d[1]
		}
		measured := cpuBoundOf(wt.cpuAt, cpuNow, rows, execNs, wt.b.threads)
		wt.cpu = wt.cpu.fold(measured)
		wall := float64(cpuNow.at.Sub(wt.cpuAt.at))
		wt.log.Debug("autopilot CPU", "rate", round1(rate), "cpus", cpuNow.cpus, "process_cpus", round1(float64(cpuNow.proc-wt.cpuAt.proc)/wall),
			"host_cpus", round1(float64(cpuNow.hostBusy-wt.cpuAt.hostBusy)/wall), "executions_s", round1(execNs/1e9),
			"cpus_free", round1(measured.avail), "cpu_per_row_us", round1(measured.perRow/1e3), "threads", round1(measured.theta))
		wt.cpuAt, cb = cpuNow, wt.cpu
	}
	wt.prev, wt.last, wt.from = wt.last, snap, now

	a, s, oneSize, known := wt.costs.fitSizes()
	m := model{a: a, s: s, gamma: wt.gamma, b: wt.b, pipelined: wt.tuner.Pipelined(), oneSize: oneSize, cpu: cb}
	if execs := float64(snap.ExecutionCount - wt.prev.ExecutionCount); cur.delay == 0 && execs > 0 {
		m.observed = rows / execs
		if !thin {
			wt.small = m.smallBatches(m.observed, rate)
		}
	}
	m.small = wt.small
	steady := !wt.moved && snap.Pending <= 2*cur.cap*int64(wt.b.instances)
	if known && !thin && steady && m.capacity(cur.cap) >= rate*(1+margin) {
		// What the window teaches of the tail: p99 ÷ the modelled latency
		// at the setting it ran under. Not from a window the setting could
		// not carry, nor one that began under another setting or ended with
		// a backlog: its p99 is the backlog's, which no factor models. One
		// window moves the factor by at most half or double.
		m1 := m
		m1.gamma = 1
		pred := m1.latency(rate, cur.pref, cur.delay)
		if cur.delay == 0 {
			pred = m1.undelayed(rate, cur.pref)
		}
		if pred > 0 && pred < time.Hour {
			g := min(max(float64(p99)/float64(pred), wt.gamma/2), 2*wt.gamma)
			wt.gamma = min(max(0.5*wt.gamma+0.5*g, 1), gammaMax)
			m.gamma = wt.gamma
		}
	}
	d := decision{setting: cur, reason: "no execution measured yet: holding"}
	if known {
		d = decide(m, cur, rate, n, p99)
	}
	byCPUs := known && m.cpuBinds(max(d.cap, 1))
	changed := !samePref(d.pref, cur.pref) || !samePref(d.cap, cur.cap) || !near(d.delay, cur.delay) || (d.delay == 0) != (cur.delay == 0)
	to := wt.b.tuning(d.setting)
	wt.moved = changed
	if changed {
		wt.tuner.Tune(to)
		wt.log.Info("autopilot", "decision", d.reason, "max_queue_delay_us", d.delay.Microseconds(), "preferred_batch_size", d.pref,
			"max_batch", d.cap, "from_delay_us", cur.delay.Microseconds(), "from_preferred", cur.pref, "from_max_batch", cur.cap,
			"p99_ms", ms(p99), "rate", round1(rate),
			"capacity", round1(d.capacity), "cost_fixed_us", round1(a/1e3), "cost_per_row_us", round1(s/1e3), "tail_factor", round1(wt.gamma),
			"cpus_free", round1(cb.avail), "cpu_per_row_us", round1(cb.perRow/1e3), "cpu_bound", byCPUs)
	}
	if wt.onPeriod != nil {
		wt.onPeriod(figures{at: now, requests: n, rate: rate, p99: p99, capacity: d.capacity, cpuBound: byCPUs})
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	r := &wt.report
	r.MeasuredP99, r.Requests, r.RatePerSec = p99, n, rate
	r.CapacityPerSec = d.capacity
	r.Headroom = 0
	if d.capacity > 0 {
		r.Headroom = 1 - rate/d.capacity
	}
	r.BatchTuning = wt.b.effective(wt.tuner.Tuning())
	if changed {
		r.Decisions = append(r.Decisions, core.SLODecision{At: now, To: wt.b.effective(to), From: tuning,
			Reason: d.reason, MeasuredP99: p99, RatePerSec: rate, Capacity: d.capacity})
		if len(r.Decisions) > wt.keep {
			r.Decisions = slices.Delete(r.Decisions, 0, len(r.Decisions)-wt.keep)
		}
	}
}

// tuning is st as the scheduler takes it: no cap where it is
// max_batch_size.
func (b bounds) tuning(st setting) core.BatchTuning {
	t := core.BatchTuning{Delay: st.delay, Preferred: []int64{st.pref}}
	if st.cap < b.maxBS {
		t.MaxBatch = st.cap
	}
	return t
}

// effective is t as a report shows it: the cap in force, max_batch_size
// where none is set.
func (b bounds) effective(t core.BatchTuning) core.BatchTuning {
	if t.MaxBatch <= 0 || t.MaxBatch > b.maxBS {
		t.MaxBatch = b.maxBS
	}
	return t
}

// samePref says two preferred sizes are the same setting: within 2 or a
// quarter, so that a cost model that moves a little each period does not
// retune every period.
func samePref(a, b int64) bool {
	diff := a - b
	if diff < 0 {
		diff = -diff
	}
	return diff < max(2, max(a, b)/4)
}

// near says two delays are the same setting: within a quarter or 100 µs,
// so that noise does not retune every period.
func near(a, b time.Duration) bool {
	diff := a - b
	if diff < 0 {
		diff = -diff
	}
	return diff <= max(time.Duration(0.25*float64(max(a, b))), 100*time.Microsecond)
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// batchDeltas are the executions per batch size (count, total ns of the
// compute phases) between two snapshots' batch statistics. A pipelining
// instance's cost is its infer phase alone: its input phase includes the
// wait behind the batch it runs, and both the input and output phases
// overlap the worker's next or last execution.
func batchDeltas(before, after []core.BatchStats, pipelined bool) map[int64][2]float64 {
	prev := map[uint64]core.BatchStats{}
	for _, b := range before {
		prev[b.BatchSize] = b
	}
	out := map[int64][2]float64{}
	for _, b := range after {
		p := prev[b.BatchSize]
		n := float64(b.ComputeInfer.Count - p.ComputeInfer.Count)
		if n <= 0 {
			continue
		}
		ns := float64(b.ComputeInfer.Ns - p.ComputeInfer.Ns)
		if !pipelined {
			ns += float64(b.ComputeInput.Ns-p.ComputeInput.Ns) + float64(b.ComputeOutput.Ns-p.ComputeOutput.Ns)
		}
		out[int64(b.BatchSize)] = [2]float64{n, ns}
	}
	return out
}
