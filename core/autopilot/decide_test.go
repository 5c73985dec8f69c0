package autopilot

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// testModel costs 2 ms + 0.25 ms a row on one instance, max_batch_size 16,
// p99 target 20 ms: one-row executions carry 444 rows/s, batches of 16
// carry 2,667.
func testModel() model {
	return model{a: 2e6, s: 0.25e6, gamma: 1.5,
		b: bounds{target: 20 * time.Millisecond, maxDelay: 10 * time.Millisecond, maxBS: 16, instances: 1}}
}

func TestDecide(t *testing.T) {
	tight := testModel()
	tight.b.target = 8 * time.Millisecond // batches of 3 or more run too long
	for _, tc := range []struct {
		name     string
		m        model
		cur      setting
		rate     float64
		n        uint64
		wantPref int64
		delay    time.Duration
		reason   string
	}{
		{"thin traffic with a delay no batch fills: no delay", testModel(), setting{5 * time.Millisecond, 8, 16}, 20, 40, 16, 0, "no delay"},
		{"thin traffic that fills batches: holds", testModel(), setting{5 * time.Millisecond, 8, 16}, 400, 40, 8, 5 * time.Millisecond, "holding"},
		{"a delay the rate does not need: none", testModel(), setting{5 * time.Millisecond, 8, 16}, 200, 400, 16, 0, "no delay, batches up to 16 (about 1)"},
		{"a rate one-row executions cannot carry: batches form without a delay", testModel(), setting{0, 16, 16}, 1200, 2400, 16, 0, "(about 4)"},
		{"a tight target caps the batches", tight, setting{0, 16, 16}, 300, 600, 2, 0, "batches up to 2"},
		{"over what the target allows", testModel(), setting{0, 16, 16}, 5000, 10000, 16, 0, "over what the target allows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(tc.m, tc.cur, tc.rate, tc.n, 10*time.Millisecond)
			if d.pref != tc.wantPref || d.delay != tc.delay {
				t.Errorf("preferred %d, delay %v; want %d, %v (%s)", d.pref, d.delay, tc.wantPref, tc.delay, d.reason)
			}
			if !strings.Contains(d.reason, tc.reason) {
				t.Errorf("reason %q lacks %q", d.reason, tc.reason)
			}
			if tc.n >= minRequests && d.capacity < tc.rate && !strings.Contains(d.reason, "over") {
				t.Errorf("capacity %.0f below the rate %.0f", d.capacity, tc.rate)
			}
		})
	}
}

// TestDecidePipelined: instances that take their next batch while they
// run the last (Python workers) batch only what a delay gathers: a rate
// one-row executions cannot carry gets a delay and a preferred size that
// carry it within the target; over what any does, the delay that fills the
// largest batches.
func TestDecidePipelined(t *testing.T) {
	m := testModel()
	m.pipelined, m.observed = true, 1
	d := decide(m, setting{0, 16, 16}, 1200, 2400, 10*time.Millisecond)
	if d.delay == 0 || d.pref < 5 || d.pref > 8 || d.capacity < 1200 {
		t.Errorf("pipelined at 1200 rows/s: delay %v, preferred %d, capacity %.0f (%s)", d.delay, d.pref, d.capacity, d.reason)
	}
	if got := m.latency(1200, d.pref, d.delay); got > m.b.target {
		t.Errorf("modelled p99 %v over the target", got)
	}
	if d := decide(m, setting{0, 16, 16}, 200, 400, 0); d.delay != 0 {
		t.Errorf("pipelined at 200 rows/s (one-row executions carry 444/s): delay %v (%s)", d.delay, d.reason)
	}
	over := decide(m, setting{0, 16, 16}, 5000, 10000, 0)
	if over.pref != 16 || over.delay == 0 || over.delay > m.b.maxDelay {
		t.Errorf("pipelined over the target: delay %v, preferred %d (%s)", over.delay, over.pref, over.reason)
	}
}

func TestSamePref(t *testing.T) {
	for _, tc := range []struct {
		a, b int64
		want bool
	}{{16, 14, true}, {16, 12, false}, {4, 5, true}, {4, 6, false}, {1, 16, false}} {
		if got := samePref(tc.a, tc.b); got != tc.want {
			t.Errorf("samePref(%d, %d) = %v", tc.a, tc.b, got)
		}
	}
}

// TestDecideWithinTarget: whatever the rate, the setting chosen keeps the
// modelled p99 within the target when any setting can.
func TestDecideWithinTarget(t *testing.T) {
	m := testModel()
	for rate := 50.0; rate < 2000; rate *= 1.3 {
		d := decide(m, setting{0, 16, 16}, rate, 1000, 0)
		if strings.Contains(d.reason, "over what the target allows") {
			if rate < 1500 {
				t.Errorf("rate %.0f judged over the target: %s", rate, d.reason)
			}
			continue
		}
		got := m.latency(rate, d.pref, d.delay)
		if d.delay == 0 {
			got = m.undelayed(rate, d.pref)
		}
		if got > m.b.target {
			t.Errorf("rate %.0f: batches of %d with delay %v model a p99 of %v, over %v", rate, d.pref, d.delay, got, m.b.target)
		}
	}
}

func TestCostFit(t *testing.T) {
	c := costs{}
	c.add(map[int64][2]float64{1: {100, 100 * 2.25e6}, 8: {50, 50 * 4e6}})
	a, s, _, ok := c.fitSizes()
	if !ok || math.Abs(a-2e6) > 1e3 || math.Abs(s-0.25e6) > 1e3 {
		t.Errorf("fit a=%v s=%v ok=%v, want 2e6, 0.25e6", a, s, ok)
	}
	// One size alone: no gain from batching assumed.
	one := costs{}
	one.add(map[int64][2]float64{4: {10, 10 * 4e6}})
	if a, s, _, ok := one.fitSizes(); !ok || a != 0 || math.Abs(s-1e6) > 1 {
		t.Errorf("one size: a=%v s=%v ok=%v, want 0, 1e6", a, s, ok)
	}
	if _, _, _, ok := (costs{}).fitSizes(); ok {
		t.Error("no executions: a fit")
	}
	// Older periods weigh less: a change of cost is followed.
	c.add(map[int64][2]float64{1: {100, 100 * 4.5e6}, 8: {50, 50 * 8e6}})
	if a, _, _, _ := c.fitSizes(); a < 3e6 {
		t.Errorf("after costs doubled, a=%v: the old costs still dominate", a)
	}
}

func TestWindowQuantile(t *testing.T) {
	var w window
	var seen [numBuckets]uint64
	for us := 1; us <= 1000; us++ {
		w.counts[bucketOf(time.Duration(us)*time.Microsecond)].Add(1)
	}
	counts, n := w.since(&seen)
	advance(&seen, &counts)
	if n != 1000 {
		t.Fatalf("%d counted", n)
	}
	if p := quantile(&counts, n, 0.99); p < 990*time.Microsecond || p > 1040*time.Microsecond {
		t.Errorf("p99 %v, want 990 µs within 5%%", p)
	}
	if _, n := w.since(&seen); n != 0 {
		t.Errorf("a second take saw %d", n)
	}
	if bucketOf(time.Hour*1000) != numBuckets-1 || bucketOf(0) != 0 {
		t.Error("bounds")
	}
}

func TestNear(t *testing.T) {
	for _, tc := range []struct {
		a, b time.Duration
		want bool
	}{
		{0, 0, true}, {0, 50 * time.Microsecond, true}, {0, time.Millisecond, false},
		{4 * time.Millisecond, 4500 * time.Microsecond, true}, {4 * time.Millisecond, 6 * time.Millisecond, false},
	} {
		if got := near(tc.a, tc.b); got != tc.want {
			t.Errorf("near(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}

// TestCapacityIsSaturation: the capacity reported at a setting is the rate
// a saturating load is served at, in batches of the cap, whatever the
// preferred size a delay waits for; and the cap keeps a batch's execution,
// waited for and run, within the target.
func TestCapacityIsSaturation(t *testing.T) {
	m := testModel()
	m.b.target = 12 * time.Millisecond // at gamma 1.5, two executions of 8 rows (4 ms each) fit, of 9 do not
	for _, rate := range []float64{300, 900, 1500} {
		d := decide(m, setting{0, 16, 16}, rate, 1000, 0)
		if d.cap != 8 {
			t.Errorf("rate %.0f: cap %d, want 8 (%s)", rate, d.cap, d.reason)
		}
		if want := m.capacity(8); math.Abs(d.capacity-want) > 1 {
			t.Errorf("rate %.0f: capacity %.0f, want %.0f, batches of the cap (preferred %d, delay %v)", rate, d.capacity, want, d.pref, d.delay)
		}
	}
	if tu := m.b.tuning(setting{time.Millisecond, 4, 16}); tu.MaxBatch != 0 || tu.Delay != time.Millisecond || tu.Preferred[0] != 4 {
		t.Errorf("a cap at max_batch_size is no cap: %+v", tu)
	}
	if tu := m.b.tuning(setting{0, 10, 10}); tu.MaxBatch != 10 {
		t.Errorf("cap 10 of 16: %+v", tu)
	}
}

// TestBatchDeltasPipelined: a pipelining instance's cost is its infer
// phase (its input phase holds the wait behind the running batch); other
// instances pay all three phases.
func TestBatchDeltasPipelined(t *testing.T) {
	phase := func(n, ns uint64) core.Duration { return core.Duration{Count: n, Ns: ns} }
	after := []core.BatchStats{{BatchSize: 4, ComputeInput: phase(10, 50e6), ComputeInfer: phase(10, 40e6), ComputeOutput: phase(10, 10e6)}}
	if got := batchDeltas(nil, after, true)[4]; got != [2]float64{10, 40e6} {
		t.Errorf("pipelined: %v, want 10 executions of 40 ms in all", got)
	}
	if got := batchDeltas(nil, after, false)[4]; got != [2]float64{10, 100e6} {
		t.Errorf("serial: %v, want 10 executions of 100 ms in all", got)
	}
}

// TestDecideLowestWhenNoneFits: where some setting carries the rate but
// none is modelled within the target, the one modelled lowest is chosen
// (here one-row executions, 13.5 ms), not the largest batches that an
// over-load needs.
func TestDecideLowestWhenNoneFits(t *testing.T) {
	m := testModel()
	m.gamma, m.b.target = 3, 12*time.Millisecond
	d := decide(m, setting{0, 16, 16}, 300, 1000, 30*time.Millisecond)
	if !strings.Contains(d.reason, "the lowest") || d.setting != (setting{0, 1, 1}) || d.capacity < 300*(1+margin) {
		t.Errorf("%+v: %s (capacity %.0f)", d.setting, d.reason, d.capacity)
	}
}

// TestOneSizeCapsNothing: a cost line measured at one batch size says
// nothing of larger batches, so it caps none (a cap from it held a model
// that had only run single rows to batches of 3 when its rate rose).
func TestOneSizeCapsNothing(t *testing.T) {
	c := costs{}
	c.add(map[int64][2]float64{1: {100, 100 * 1e6}})
	a, s, one, ok := c.fitSizes()
	if !ok || !one {
		t.Fatalf("one size: oneSize %v ok %v", one, ok)
	}
	m := model{a: a, s: s, gamma: 2.5, oneSize: true,
		b: bounds{target: 20 * time.Millisecond, maxDelay: 10 * time.Millisecond, maxBS: 8, instances: 1}}
	if d := decide(m, setting{0, 8, 8}, 200, 400, 5*time.Millisecond); d.cap != 8 {
		t.Errorf("cap %d from one measured size, want max_batch_size 8 (%s)", d.cap, d.reason)
	}
	m.oneSize = false
	if d := decide(m, setting{0, 8, 8}, 200, 400, 5*time.Millisecond); d.cap >= 8 {
		t.Errorf("the same line measured over sizes: cap %d, want under 8 (%s)", d.cap, d.reason)
	}
	c.add(map[int64][2]float64{4: {50, 50 * 2e6}})
	if _, _, one, _ := c.fitSizes(); one {
		t.Error("two sizes: still oneSize")
	}
}

// TestSeveralInstancesTakeEarly: with several instances one is mostly
// free to take what has just arrived, so with no delay batches stay the
// size they are seen at, as a pipelining instance's do: a rate one-row
// executions cannot carry gets a delay.
func TestSeveralInstancesTakeEarly(t *testing.T) {
	m := testModel()
	m.b.instances, m.observed = 2, 1
	if d := decide(m, setting{0, 16, 16}, 1500, 3000, 10*time.Millisecond); d.delay == 0 {
		t.Errorf("two instances at 1500 rows/s (one-row executions carry 889/s): no delay (%s)", d.reason)
	}
	m.b.instances = 1
	if d := decide(m, setting{0, 16, 16}, 1200, 2400, 10*time.Millisecond); d.delay != 0 {
		t.Errorf("one instance at 1200 rows/s: delay %v, want batches formed from the queue (%s)", d.delay, d.reason)
	}
}

// TestSmallBatchesTakeEarly: one instance whose batches, with no delay,
// stayed under half of what the queue should have grown them to at the
// rate they were measured at, batches as a pipelining one does: a rate
// one-row executions cannot carry gets a delay. Batches that grew, or
// small ones measured where the queue would not have grown them, keep
// the queue's batching.
func TestSmallBatchesTakeEarly(t *testing.T) {
	for _, tc := range []struct {
		name               string
		observed, measured float64 // rows an execution, at rows/s
		delay              bool
	}{
		{"one row at 1200/s, where the queue grows batches of 4", 1, 1200, true},
		{"one row at 1000/s (the queue: 3)", 1.2, 1000, true},
		{"batches of 3.5 at 1200/s", 3.5, 1200, false},
		{"one row at 200/s, where the queue grows none", 1, 200, false},
		{"nothing measured", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testModel()
			m.small = m.smallBatches(tc.observed, tc.measured)
			m.observed = tc.observed
			d := decide(m, setting{0, 16, 16}, 1200, 2400, 10*time.Millisecond)
			if (d.delay > 0) != tc.delay {
				t.Errorf("at 1200 rows/s: delay %v, want a delay %v (%s)", d.delay, tc.delay, d.reason)
			}
			if d.capacity < 1200 {
				t.Errorf("capacity %.0f under the rate (%s)", d.capacity, d.reason)
			}
			if !tc.delay {
				return
			}
			// Under the delay no batch is measured with none; the flag the
			// watch keeps holds the delay instead of trying none again
			// each period.
			m.observed = 0
			if again := decide(m, d.setting, 1200, 2400, 10*time.Millisecond); again.delay == 0 {
				t.Errorf("the next period under the delay: none (%s)", again.reason)
			}
		})
	}
}
