package autopilot

import (
	"strings"
	"testing"
	"time"
)

// byCPUs is f with the CPUs binding its capacity.
func byCPUs(f figures) figures { f.cpuBound = true; return f }

func TestScaleNext(t *testing.T) {
	const period = time.Second
	t0 := time.Unix(1000, 0)
	onnx := scaleBounds{minN: 1, maxN: 4, cpus: 8, threads: true, target: 50 * time.Millisecond, period: period, dwell: 5}
	python := onnx
	python.threads = false
	// at is period i after t0 (the dwell is over from period 5 on).
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * period) }
	fig := func(i int, rate, capa float64, p99ms int) figures {
		return figures{at: at(i), requests: 500, rate: rate, capacity: capa, p99: time.Duration(p99ms) * time.Millisecond}
	}
	for _, tc := range []struct {
		name  string
		b     scaleBounds
		cur   shape
		setup func(st *scaleState)
		feed  []figures
		// want is the last figures' decision: the change (zero: none), and
		// a text its reason holds.
		want   shape
		revert bool
		why    string
	}{
		{name: "short twice after the dwell: up to what the capacity says", b: onnx, cur: shape{1, 8},
			feed: []figures{fig(5, 900, 500, 80), fig(6, 900, 500, 90)}, want: shape{3, 2}, why: "short at 1 instance × 8 threads"},
		{name: "short twice, bound by the CPUs: holds, says why", b: onnx, cur: shape{1, 8},
			feed: []figures{byCPUs(fig(5, 900, 500, 80)), byCPUs(fig(6, 900, 500, 90))}, why: "the CPUs bound it"},
		{name: "short twice, the CPUs binding once: up", b: onnx, cur: shape{1, 8},
			feed: []figures{fig(5, 900, 500, 80), byCPUs(fig(6, 900, 500, 90))}, want: shape{3, 2}},
		{name: "short once: holds", b: onnx, cur: shape{1, 8},
			feed: []figures{fig(5, 300, 1000, 20), fig(6, 900, 500, 90)}},
		{name: "short within the dwell: holds", b: onnx, cur: shape{1, 8},
			feed: []figures{fig(2, 900, 500, 80), fig(3, 900, 500, 90)}},
		{name: "thin traffic: holds", b: onnx, cur: shape{1, 8},
			feed: []figures{{at: at(5), requests: 20, rate: 10, p99: time.Second}, {at: at(6), requests: 20, rate: 10, p99: time.Second}}},
		{name: "up capped at the config's count", b: onnx, cur: shape{2, 4},
			feed: []figures{fig(5, 5000, 500, 80), fig(6, 5000, 500, 90)}, want: shape{4, 2}},
		{name: "up skips a banned shape", b: onnx, cur: shape{1, 8},
			setup: func(st *scaleState) { st.bans[shape{2, 4}] = ban{until: at(100), strikes: 1} },
			feed:  []figures{fig(5, 500, 500, 80), fig(6, 500, 500, 90)}},
		{name: "at the count with fewer threads than the split: threads", b: onnx, cur: shape{4, 1},
			feed: []figures{fig(5, 900, 500, 80), fig(6, 900, 500, 90)}, want: shape{4, 2}, why: "no instance left to add"},
		{name: "python: no threads", b: python, cur: shape{1, 0},
			feed: []figures{fig(5, 900, 500, 80), fig(6, 900, 500, 90)}, want: shape{3, 0}},
		{name: "ample twice: one instance fewer, its threads to the rest", b: onnx, cur: shape{4, 2},
			feed: []figures{fig(5, 100, 1000, 10), fig(6, 100, 1000, 10)}, want: shape{3, 2}, why: "leaves room"},
		{name: "not ample with one fewer: holds", b: onnx, cur: shape{2, 4},
			feed: []figures{fig(5, 400, 1000, 10), fig(6, 400, 1000, 10)}},
		{name: "down uses the capacity measured there", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) { st.known[shape{1, 8}] = 2000 },
			feed:  []figures{fig(5, 400, 1000, 10), fig(6, 400, 1000, 10)}, want: shape{1, 8}},
		{name: "at the fewest instances: holds", b: onnx, cur: shape{1, 8},
			feed: []figures{fig(5, 10, 1000, 5), fig(6, 10, 1000, 5)}},
		{name: "slo_min_instances bounds the way down", b: scaleBounds{minN: 2, maxN: 4, cpus: 8, threads: true, target: 50 * time.Millisecond, period: period, dwell: 5},
			cur: shape{2, 4}, feed: []figures{fig(5, 10, 1000, 5), fig(6, 10, 1000, 5)}},
		{name: "a move up that measured less capacity is reverted", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{1, 8}, up: true, before: summary{rate: 900, capacity: 800, p99: 80 * time.Millisecond}}
			},
			feed: []figures{fig(1, 900, 500, 90), fig(3, 900, 500, 90), fig(5, 900, 520, 90)}, want: shape{1, 8}, revert: true, why: "capacity 510/s, was 800/s"},
		{name: "a move up that measured more capacity is kept", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{1, 8}, up: true, before: summary{rate: 900, capacity: 800, p99: 80 * time.Millisecond}}
			},
			feed: []figures{fig(3, 900, 1500, 30), fig(5, 900, 1500, 30)}, why: "kept"},
		{name: "a move down whose p99 missed the target is reverted", b: onnx, cur: shape{1, 8},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{2, 4}, before: summary{rate: 100, capacity: 1000, p99: 10 * time.Millisecond}}
			},
			feed: []figures{fig(3, 100, 900, 60), fig(5, 100, 900, 60)}, want: shape{2, 4}, revert: true, why: "p99 60ms over the target 50ms"},
		{name: "a move down whose p99 rose within the target is kept", b: onnx, cur: shape{1, 8},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{2, 4}, before: summary{rate: 100, capacity: 1000, p99: 10 * time.Millisecond}}
			},
			feed: []figures{fig(3, 100, 900, 30), fig(5, 100, 900, 30)}, why: "kept"},
		{name: "a move up at the same rate whose p99 rose is reverted", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{1, 8}, up: true, before: summary{rate: 900, p99: 80 * time.Millisecond}}
			},
			feed: []figures{fig(3, 900, 0, 200), fig(5, 900, 0, 200)}, want: shape{1, 8}, revert: true, why: "p99 200ms at 900/s, was 80ms"},
		{name: "down waits for a rate well below the one it left the shape at", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) { st.shortAt[shape{1, 8}] = 500 },
			feed:  []figures{fig(5, 400, 2000, 10), fig(6, 400, 2000, 10)}},
		{name: "and goes down once the rate is", b: onnx, cur: shape{2, 4},
			setup: func(st *scaleState) { st.shortAt[shape{1, 8}] = 500 },
			feed:  []figures{fig(5, 300, 2000, 10), fig(6, 300, 2000, 10)}, want: shape{1, 8}},
		{name: "a trial waits for settled periods", b: onnx, cur: shape{1, 8},
			setup: func(st *scaleState) {
				st.trial = &trial{from: shape{2, 4}, before: summary{rate: 100, capacity: 1000, p99: 10 * time.Millisecond}}
			},
			feed: []figures{fig(1, 100, 900, 30), fig(5, 100, 900, 30)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newScaleState(tc.b, tc.cur, t0)
			if tc.setup != nil {
				tc.setup(st)
			}
			var d scaleDecision
			for _, f := range tc.feed {
				d = st.next(f)
			}
			if d.change != (tc.want != shape{}) || d.to != tc.want || d.revert != tc.revert {
				t.Fatalf("decision %+v, want change to %v (revert %v)", d, tc.want, tc.revert)
			}
			if !strings.Contains(d.why, tc.why) {
				t.Fatalf("reason %q, want it to say %q", d.why, tc.why)
			}
		})
	}
}

// TestScaleBan checks that a reverted shape is banned for banDwells dwells,
// then tried again, and that a second failure doubles the ban.
func TestScaleBan(t *testing.T) {
	b := scaleBounds{minN: 1, maxN: 2, cpus: 2, threads: true, target: 50 * time.Millisecond, period: time.Second, dwell: 5}
	t0 := time.Unix(0, 0)
	st := newScaleState(b, shape{1, 2}, t0)
	st.failed(shape{2, 1}, t0)
	want := time.Duration(banDwells) * b.dwellTime()
	if got := st.bans[shape{2, 1}].until.Sub(t0); got != want {
		t.Fatalf("first ban %v, want %v", got, want)
	}
	if !st.banned(shape{2, 1}, t0.Add(want-time.Second)) || st.banned(shape{2, 1}, t0.Add(want)) {
		t.Fatal("the ban does not end when it should")
	}
	st.failed(shape{2, 1}, t0)
	if got := st.bans[shape{2, 1}].until.Sub(t0); got != 2*want {
		t.Fatalf("second ban %v, want %v", got, 2*want)
	}
}

// TestScaleDwell feeds a load that stays short: the scaler changes once,
// and not again before a dwell has passed since the change was applied.
func TestScaleDwell(t *testing.T) {
	b := scaleBounds{minN: 1, maxN: 8, cpus: 8, threads: false, target: 50 * time.Millisecond, period: time.Second, dwell: 5}
	t0 := time.Unix(0, 0)
	st := newScaleState(b, shape{1, 0}, t0)
	var changes []time.Time
	for i := 1; i <= 60; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		// The p99 stays over the target, no capacity estimated: one
		// instance more each time.
		d := st.next(figures{at: now, requests: 1000, rate: 2000, p99: time.Second})
		if d.change {
			changes = append(changes, now)
			st.applied(d.to, now)
		}
	}
	if len(changes) < 2 {
		t.Fatalf("%d changes, want at least 2", len(changes))
	}
	for i := 1; i < len(changes); i++ {
		if gap := changes[i].Sub(changes[i-1]); gap < b.dwellTime() {
			t.Fatalf("changes %v apart, within the dwell %v", gap, b.dwellTime())
		}
	}
	if st.cur.n != 8 {
		t.Fatalf("ended at %v, want the config's 8 instances", st.cur)
	}
}
