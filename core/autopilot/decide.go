package autopilot

import (
	"fmt"
	"math"
	"time"
)

// Tuning constants. margin is the spare capacity the chosen batch size
// keeps over the measured rate, so a rise within one period does not
// queue; minRequests is the fewest requests a window needs for its p99 to
// be read (at 100, the p99 is the worst but one).
const (
	margin      = 0.25
	minRequests = 100
	// gammaInit is the first guess of p99 ÷ the modelled latency, before
	// a window measures it; gammaMax bounds what a noisy window may teach.
	gammaInit, gammaMax = 2.0, 3.0
	// costDecay is the weight the execution costs measured before keep
	// each period, so the model follows a change of machine load.
	costDecay = 0.7
)

// bounds are what the configuration allows the autopilot.
type bounds struct {
	target   time.Duration // the p99 target
	maxDelay time.Duration // the longest queue delay it may set
	maxBS    int64         // max_batch_size
	// instances is the count of active instances executing batches.
	instances int
	// threads is the CPUs an execution keeps busy in this process (an
	// ONNX Runtime instance's intra-op threads); 0 where executions run
	// elsewhere (Python workers): no CPU bound then (cpu.go).
	threads float64
}

// setting is a dynamic batching setting: delay 0 dispatches what is
// queued at once, up to pref rows; a delay waits up to that long for a
// batch of pref rows, then sends what is queued up to cap rows (Triton's
// batcher would send up to max_batch_size: core.BatchTuning).
type setting struct {
	delay     time.Duration
	pref, cap int64
}

// costs is the execution cost model: for each batch size seen, the
// executions (decayed) and their total duration.
type costs map[int64]*costPoint

type costPoint struct{ n, ns float64 }

// add folds one period's executions in, after decaying what was there.
func (c costs) add(sizes map[int64][2]float64) {
	for _, p := range c {
		p.n *= costDecay
		p.ns *= costDecay
	}
	for k, v := range sizes {
		if v[0] <= 0 {
			continue
		}
		p := c[k]
		if p == nil {
			p = &costPoint{}
			c[k] = p
		}
		p.n += v[0]
		p.ns += v[1]
	}
}

// fitSizes is the line a + s·k through the measured costs (least
// squares, weighted by executions). With one size measured (oneSize), it
// assumes no gain from batching (a = 0), which no measurement backs: the
// autopilot then caps no batch and learns the rest from the batches the
// load forms.
func (c costs) fitSizes() (a, s float64, oneSize, ok bool) {
	var sw, sk, sc, skk, skc float64
	for k, p := range c {
		if p.n < 1e-3 {
			continue
		}
		x, y := float64(k), p.ns/p.n
		sw += p.n
		sk += p.n * x
		sc += p.n * y
		skk += p.n * x * x
		skc += p.n * x * y
	}
	if sw == 0 {
		return 0, 0, false, false
	}
	mk, mc := sk/sw, sc/sw
	varK := skk/sw - mk*mk
	if varK < 1e-9 {
		return 0, mc / mk, true, true
	}
	s = (skc/sw - mk*mc) / varK
	a = mc - s*mk
	if s < 0 { // noise: larger batches cannot be cheaper in total
		s, a = 0, mc
	}
	if a < 0 {
		a, s = 0, mc/mk
	}
	return a, s, false, true
}

// model is the cost line and the learnt tail factor of one decision.
type model struct {
	a, s  float64 // ns: an execution of k rows costs a + s·k
	gamma float64 // measured p99 ÷ modelled latency
	b     bounds
	// pipelined instances take their next batch while they run the last
	// (core.Tuner): with no delay, batches stay the size they were seen at
	// (observed rows per execution, 0: unknown, taken as 1) instead of
	// growing with the rate.
	pipelined bool
	observed  float64
	// small says batches measured with no delay stayed well under what
	// the queue should have grown them to (smallBatches): they are taken
	// early too. It outlasts the delay that hides it.
	small bool
	// oneSize says the cost line comes from one batch size: it says
	// nothing of larger batches, and caps none.
	oneSize bool
	// cpu is what the CPUs allow (cpu.go; zero: no bound).
	cpu cpuBound
}

func (m model) cost(k int64) time.Duration { return time.Duration(m.a + m.s*float64(k)) }

// capacity is the rows per second the instances serve in batches of k,
// and the CPUs carry.
func (m model) capacity(k int64) float64 {
	inst, cpu := m.rates(k)
	return min(inst, cpu)
}

// cpuBinds says the CPUs, not the instances, bound the capacity in
// batches of k: more instances on the same CPUs would not add any.
func (m model) cpuBinds(k int64) bool {
	inst, cpu := m.rates(k)
	return cpu < inst
}

// rates are the rows per second in batches of k that the instances
// execute and that the CPUs carry (+Inf where unbounded).
func (m model) rates(k int64) (inst, cpu float64) {
	c := m.a + m.s*float64(k)
	if c <= 0 {
		return math.Inf(1), math.Inf(1)
	}
	return float64(m.b.instances) * float64(k) / (c / 1e9), m.cpu.rate(k, c)
}

// latency is the modelled p99 at rate (rows per second) in batches of k
// waiting up to delay: the time to gather the batch, the execution and
// the queueing before it (M/D/1's mean wait), times gamma.
func (m model) latency(rate float64, k int64, delay time.Duration) time.Duration {
	c := float64(m.cost(k))
	rho := rate / m.capacity(k)
	if rho >= 1 {
		return time.Duration(math.MaxInt64)
	}
	fill := 0.0
	if k > 1 && rate > 0 {
		fill = min(float64(k-1)/rate*1e9, float64(delay))
	}
	wait := c * rho / (2 * (1 - rho))
	return time.Duration(m.gamma * (fill + c + wait))
}

// decision is what decide chose and why.
type decision struct {
	setting
	reason   string
	capacity float64 // rows per second within the target at setting
}

// takesEarly says batches do not grow by themselves with no delay: a
// pipelining instance takes its next batch while it runs the last, and
// where instances are several one is mostly free to take what has just
// arrived; their batches stay the size they are seen at, and only a delay
// makes them larger.
func (m model) takesEarly() bool { return m.pipelined || m.b.instances > 1 || m.small }

// smallBatches says batches of observed rows, measured with no delay at
// rate, stayed under half the size the queue should have grown them to:
// the instance was free when most requests came, though its executions say
// it should not have been. On a host whose cores the frontends (and a load
// generator) share with the model, requests reach the queue as CPU frees,
// one at a time; there, as with a pipelining instance, only a delay makes
// batches larger (docs/autopilot.md).
func (m model) smallBatches(observed, rate float64) bool {
	if observed <= 0 || rate <= 0 {
		return false
	}
	return observed < 0.5*float64(m.queueBatch(rate, m.b.maxBS))
}

// selfBatch is the batch size executions settle at with no queue delay at
// rate: what they are seen at where batches are taken early, else what
// the queue grows them to (queueBatch).
func (m model) selfBatch(rate float64, limit int64) int64 {
	if m.takesEarly() {
		return min(max(int64(math.Ceil(m.observed)), 1), limit)
	}
	return m.queueBatch(rate, limit)
}

// queueBatch is the batch size each instance takes if it takes what
// arrived while it ran the last batch: k = rate·c(k)/instances, so
// k = rate·a / (instances - rate·s); capped at limit, which is also the
// answer when the instances cannot keep up.
func (m model) queueBatch(rate float64, limit int64) int64 {
	den := float64(m.b.instances) - rate*m.s/1e9
	if den <= 0 {
		return limit
	}
	k := int64(math.Ceil(rate * m.a / 1e9 / den))
	return min(max(k, 1), limit)
}

// undelayed is the modelled p99 with no queue delay and batches capped at
// limit: a request waits for a running execution to end, then runs in the
// next, each of the self-settled size.
func (m model) undelayed(rate float64, limit int64) time.Duration {
	k := m.selfBatch(rate, limit)
	if m.capacity(m.undelayedCap(rate, limit)) <= rate {
		return time.Duration(math.MaxInt64)
	}
	c := float64(m.cost(k))
	return time.Duration(m.gamma * (c/float64(m.b.instances) + c))
}

// undelayedCap is the batch size that bounds the capacity with no delay:
// the cap itself where batches grow with the queue, the size they are
// seen at where instances pipeline.
func (m model) undelayedCap(rate float64, limit int64) int64 {
	if m.takesEarly() {
		return m.selfBatch(rate, limit)
	}
	return limit
}

// limit is the largest batch whose execution, waited for and then run,
// fits the target: what a saturating load may form.
func (m model) limit() int64 {
	if m.oneSize {
		// Batches grow from what queues; their costs are learnt then.
		return m.b.maxBS
	}
	best := int64(1)
	for k := int64(1); k <= m.b.maxBS; k++ {
		if m.gamma*float64(m.cost(k))*(1+1/float64(m.b.instances)) <= float64(m.b.target) {
			best = k
		}
	}
	return best
}

// decide picks the setting for the next period from the last one's
// measurements: rate in rows per second, n requests, p99. It prefers no
// queue delay, where batches form by themselves from what queues while the
// instances run (the lowest latency at any rate the instances carry), with
// batches capped where the target caps them; a delay waiting for a
// preferred batch only where the model says it does better.
func decide(m model, cur setting, rate float64, n uint64, p99 time.Duration) decision {
	b := m.b
	need := rate * (1 + margin)
	// The cap never takes away capacity the rate needs: a load the capped
	// batches cannot carry would queue without bound.
	lim := m.limit()
	for lim < b.maxBS && m.capacity(lim) < need {
		lim++
	}
	nodelay := setting{0, lim, lim}
	if n < minRequests {
		if cur.delay > 0 && rate*cur.delay.Seconds() < 1 {
			return decision{nodelay, fmt.Sprintf("thin traffic (%d requests, %.1f/s): no batch fills within the delay; no delay", n, rate), m.within(nodelay)}
		}
		return decision{cur, fmt.Sprintf("thin traffic (%d requests): holding", n), m.within(cur)}
	}
	best, bestLat := nodelay, time.Duration(math.MaxInt64)
	if m.capacity(m.undelayedCap(rate, lim)) >= need {
		bestLat = m.undelayed(rate, lim)
	}
	for k := int64(2); k <= lim; k++ {
		if m.capacity(k) < need {
			continue
		}
		st := m.settingFor(rate, k, lim)
		if st.delay == 0 {
			continue
		}
		if l := m.latency(rate, k, st.delay); l < bestLat {
			best, bestLat = st, l
		}
	}
	if bestLat <= b.target {
		why := fmt.Sprintf("%.0f rows/s: no delay, batches up to %d (about %d) carry %.0f/s within %v (p99 was %v)",
			rate, lim, m.selfBatch(rate, lim), m.within(best), b.target, p99)
		if best.delay > 0 {
			why = fmt.Sprintf("%.0f rows/s: batches of %d carry %.0f/s within %v (p99 was %v)", rate, best.pref, m.capacity(best.pref), b.target, p99)
		}
		return decision{best, why, m.within(best)}
	}
	if bestLat < time.Duration(math.MaxInt64) {
		// Some setting carries the rate, none is modelled within the
		// target: the one modelled lowest, rather than the largest batches,
		// whose filling and execution only lengthen the wait.
		why := fmt.Sprintf("%.0f rows/s: no setting is modelled within %v (p99 was %v); the lowest, %v, with %s",
			rate, b.target, p99, bestLat, describe(best))
		return decision{best, why, m.within(best)}
	}
	// Over what the instances carry within the target's batches: the most
	// they can do, so that the queue drains; the target is out of reach
	// until the rate falls.
	full := setting{0, b.maxBS, b.maxBS}
	if m.takesEarly() && rate > 0 {
		// Only a delay lets a pipelining instance's batches grow.
		full.delay = min(b.maxDelay, time.Duration(1.5*float64(b.maxBS-1)/rate*1e9)).Round(time.Microsecond)
	}
	how := fmt.Sprintf("no delay, batches up to %d", b.maxBS)
	if full.delay > 0 {
		how = fmt.Sprintf("a delay of %v for batches of %d", full.delay, b.maxBS)
	}
	why := fmt.Sprintf("%.0f rows/s is over what the target allows (at most %.0f/s within %v; p99 was %v): %s",
		rate, m.capacity(m.limit()), b.target, p99, how)
	if m.capacity(m.limit()) > need {
		why = fmt.Sprintf("no setting is modelled within %v at %.0f rows/s (one row waited for and run: %v; p99 was %v): %s",
			b.target, rate, time.Duration(m.gamma*float64(m.cost(1))*(1+1/float64(b.instances))), p99, how)
	}
	return decision{full, why, m.within(full)}
}

// describe says what st does, for a decision's reason.
func describe(st setting) string {
	if st.delay == 0 {
		return fmt.Sprintf("no delay, batches up to %d", st.cap)
	}
	return fmt.Sprintf("a delay of %v for batches of %d (at most %d)", st.delay, st.pref, st.cap)
}

// settingFor is the setting that gathers batches of k at rate, capped at
// lim: a delay of 1.5 times the time k rows take to arrive, so a batch
// fills at the rate measured and a slower stretch does not hold its first
// row long; never past the configured bound or what the target leaves
// after the execution. Batches of 1 need no delay.
func (m model) settingFor(rate float64, k, lim int64) setting {
	if k <= 1 || rate <= 0 {
		return setting{0, lim, lim}
	}
	d := time.Duration(1.5 * float64(k-1) / rate * 1e9)
	limit := min(m.b.maxDelay, time.Duration(float64(m.b.target)/m.gamma)-m.cost(k))
	d = min(d, limit)
	if d <= 0 {
		return setting{0, lim, lim}
	}
	return setting{d.Round(time.Microsecond), k, lim}
}

// within is the capacity at st: what a saturating load is served at, in
// batches of the cap, which such a load forms whether or not the setting
// waits for a preferred size (past the delay the batcher sends what is
// queued up to the cap); the cap is where the target bounds a batch (0: no
// cost measured yet).
func (m model) within(st setting) float64 {
	if m.a == 0 && m.s == 0 {
		return 0
	}
	return m.capacity(max(st.cap, 1))
}
