package autopilot

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The instance scaler: between 1 (or slo_min_instances) and the config's
// instance count, with the CPUs it may use split between the instances as
// ONNX Runtime intra-op threads (docs/autopilot.md, "Instances and
// threads"). Each change is a reload, so it moves at most once a dwell,
// tries the new shape, and goes back when the shape measures worse.

// Scaler tuning. DefaultDwell is the periods between two changes of the
// instances (at least MinDwell): a reload starts fresh instances, whose
// first periods run cold, and the periods after them are what judges the
// change. settlePeriods of them are skipped as cold.
const (
	DefaultDwell  = 5
	MinDwell      = 5
	settlePeriods = 2
	// downMargin is the spare capacity one instance fewer must keep over
	// the rate before the scaler gives it up; more than margin, so that a
	// shape it leaves for want of capacity is not taken back at once.
	downMargin = 0.5
	// worseCapacity and worseP99 say a tried shape measured worse: a
	// tenth less capacity, or a quarter more p99 (plus a twentieth of the
	// target, so that noise on a small p99 does not count).
	worseCapacity = 0.9
	worseP99      = 1.25
	// banDwells is how many dwells a shape that measured worse is not
	// tried again; each further failure of it doubles that, up to
	// maxBanDoublings times.
	banDwells       = 6
	maxBanDoublings = 4
	// judgeDwells is how long a trial may wait for enough traffic to be
	// judged before it is kept as it is.
	judgeDwells = 3
	// keepFigures bounds the periods remembered since the last change.
	keepFigures = 64
)

// shape is an instance setting: n instances of t intra-op threads each
// (t 0: threads not tuned; the backend's own).
type shape struct{ n, t int }

func (s shape) String() string {
	inst := "instances"
	if s.n == 1 {
		inst = "instance"
	}
	if s.t == 0 {
		return fmt.Sprintf("%d %s", s.n, inst)
	}
	thr := "threads"
	if s.t == 1 {
		thr = "thread"
	}
	return fmt.Sprintf("%d %s × %d %s", s.n, inst, s.t, thr)
}

// scaleBounds are what the configuration allows the scaler.
type scaleBounds struct {
	minN, maxN int
	// cpus is what the instances may use between them (slo_max_cpus,
	// else GOMAXPROCS); threads says they are ONNX Runtime sessions whose
	// intra-op threads split it.
	cpus    int
	threads bool
	target  time.Duration
	period  time.Duration
	dwell   int // periods
}

// at is the shape of n instances: the CPUs split between them.
func (b scaleBounds) at(n int) shape {
	if !b.threads {
		return shape{n: n}
	}
	return shape{n, max(1, b.cpus/n)}
}

func (b scaleBounds) dwellTime() time.Duration { return time.Duration(b.dwell) * b.period }

// figures are what a watch measured in one period, and the capacity at
// the batching it set (0: not estimated yet).
type figures struct {
	at       time.Time
	requests uint64
	rate     float64
	p99      time.Duration
	capacity float64
	// cpuBound says the CPUs, not the instances, bound the capacity
	// (model.cpuBinds): another instance on the same CPUs adds none.
	cpuBound bool
}

func (f figures) thin() bool { return f.requests < minRequests }

// short says the batching cannot hold the target at this shape: the p99
// is over it, or the capacity within it leaves less than margin.
func (f figures) short(target time.Duration) bool {
	return f.p99 > target || (f.capacity > 0 && f.capacity < f.rate*(1+margin))
}

// summary is the mean of some periods' figures.
type summary struct {
	rate, capacity float64
	p99            time.Duration
	periods        int
}

func summarize(fs []figures) summary {
	var s summary
	var p99 float64
	caps := 0
	for _, f := range fs {
		s.rate += f.rate
		p99 += float64(f.p99)
		if f.capacity > 0 {
			s.capacity += f.capacity
			caps++
		}
	}
	if len(fs) == 0 {
		return s
	}
	s.periods = len(fs)
	s.rate /= float64(len(fs))
	s.p99 = time.Duration(p99 / float64(len(fs)))
	if caps > 0 {
		s.capacity /= float64(caps)
	}
	return s
}

// trial is a change being judged: where it came from and what was
// measured there.
type trial struct {
	from   shape
	up     bool
	before summary
}

type ban struct {
	until   time.Time
	strikes int
}

// scaleState is one model's scaler: what it set, when, and what it
// learnt. It lives across its own reloads (Pilot.scalers).
type scaleState struct {
	b     scaleBounds
	cur   shape
	since time.Time // the last change, or the scaler's start
	trial *trial
	bans  map[shape]ban
	seen  []figures         // periods with enough requests since the last change
	known map[shape]float64 // capacity measured at each shape tried
	// shortAt is the lowest rate each shape was left for being short at:
	// the way back down waits for a rate well below it.
	shortAt map[shape]float64
}

func newScaleState(b scaleBounds, cur shape, now time.Time) *scaleState {
	return &scaleState{b: b, cur: cur, since: now, bans: map[shape]ban{}, known: map[shape]float64{}, shortAt: map[shape]float64{}}
}

// scaleDecision is what next chose: a change to shape to (change), or a
// note worth logging without one (note), or nothing.
type scaleDecision struct {
	to     shape
	change bool
	revert bool
	why    string
}

// next takes one period's figures and says whether to change the shape.
// It holds on thin traffic, within the dwell of the last change, and
// while a trial waits to be judged; it moves up when two periods in a row
// are short, down when two in a row leave one instance fewer ample room.
func (st *scaleState) next(f figures) scaleDecision {
	if f.thin() {
		return scaleDecision{}
	}
	st.seen = append(st.seen, f)
	if len(st.seen) > keepFigures {
		st.seen = slices.Delete(st.seen, 0, len(st.seen)-keepFigures)
	}
	if f.at.Sub(st.since) < st.b.dwellTime() {
		return scaleDecision{}
	}
	if st.trial != nil {
		d, _ := st.judge(f.at)
		return d
	}
	if len(st.seen) < 2 {
		return scaleDecision{}
	}
	last := st.seen[len(st.seen)-2:]
	if last[0].short(st.b.target) && last[1].short(st.b.target) {
		if last[0].cpuBound && last[1].cpuBound {
			// The instances share the CPUs the scaler may give them: a
			// reload would only cost the serving copy its CPU meanwhile.
			return scaleDecision{why: fmt.Sprintf("%.0f/s is short at %v (p99 %v, target %v), but the CPUs bound it (capacity %.0f/s): more instances would add no capacity",
				f.rate, st.cur, f.p99, st.b.target, f.capacity)}
		}
		return st.up(f)
	}
	return st.down(last, f)
}

// judge compares the periods since the trial's change settled with those
// before it: a worse shape is reverted and banned for a while; false
// while too few periods have settled to tell.
func (st *scaleState) judge(now time.Time) (scaleDecision, bool) {
	t := st.trial
	settled := st.since.Add(settlePeriods * st.b.period)
	var after []figures
	for _, f := range st.seen {
		if !f.at.Before(settled) {
			after = append(after, f)
		}
	}
	if len(after) < 2 {
		if now.Sub(st.since) < judgeDwells*st.b.dwellTime() {
			return scaleDecision{}, false
		}
		st.trial = nil
		return scaleDecision{why: fmt.Sprintf("%v kept: too little traffic since the change to judge it", st.cur)}, true
	}
	a := summarize(after)
	st.trial = nil
	if a.capacity > 0 {
		st.known[st.cur] = a.capacity
	}
	if why := worse(t, a, st.b.target); why != "" {
		tried := st.cur
		bn := st.bans[tried]
		bn.strikes = min(bn.strikes+1, maxBanDoublings+1)
		ban := time.Duration(banDwells<<(bn.strikes-1)) * st.b.dwellTime()
		bn.until = now.Add(ban)
		st.bans[tried] = bn
		return scaleDecision{to: t.from, change: true, revert: true,
			why: fmt.Sprintf("%v measured worse than %v (%s): back to %v, not tried again for %v", tried, t.from, why, t.from, ban.Round(time.Second))}, true
	}
	return scaleDecision{why: fmt.Sprintf("%v kept: p99 %v at %.0f/s, capacity %.0f/s (before: p99 %v at %.0f/s, capacity %.0f/s)",
		st.cur, a.p99, a.rate, a.capacity, t.before.p99, t.before.rate, t.before.capacity)}, true
}

// worse says why the figures after a change are worse than before it
// ("" when they are not). A move up was made for capacity, and is worse
// when it measures less, or a higher p99 at the same rate; a move down
// gives back CPUs and memory the load does not need, and is worse when
// the p99 misses the target or the capacity no longer covers the rate
// with margin (a p99 higher than before but within the target is the
// price of the resources it frees).
func worse(t *trial, a summary, target time.Duration) string {
	b := t.before
	if t.up {
		switch {
		case a.capacity > 0 && b.capacity > 0 && a.capacity < worseCapacity*b.capacity:
			return fmt.Sprintf("capacity %.0f/s, was %.0f/s", a.capacity, b.capacity)
		case float64(a.p99) > worseP99*float64(b.p99)+0.05*float64(target) && a.rate <= (1+margin)*b.rate:
			return fmt.Sprintf("p99 %v at %.0f/s, was %v at %.0f/s", a.p99, a.rate, b.p99, b.rate)
		}
		return ""
	}
	switch {
	case a.p99 > target:
		return fmt.Sprintf("p99 %v over the target %v", a.p99, target)
	case a.capacity > 0 && a.capacity < a.rate*(1+margin):
		return fmt.Sprintf("capacity %.0f/s leaves no margin over %.0f/s", a.capacity, a.rate)
	}
	return ""
}

func (st *scaleState) banned(s shape, now time.Time) bool {
	b, ok := st.bans[s]
	return ok && now.Before(b.until)
}

// up moves to the fewest instances the measured capacity says carry the
// rate with margin (at least one more), up to the config's count; at the
// count, to the threads the split gives when fewer are set.
func (st *scaleState) up(f figures) scaleDecision {
	cur := st.cur
	want := cur.n + 1
	if f.capacity > 0 {
		want = max(want, int(math.Ceil(float64(cur.n)*f.rate*(1+margin)/f.capacity)))
	}
	want = min(want, st.b.maxN)
	if r, ok := st.shortAt[cur]; !ok || f.rate < r {
		st.shortAt[cur] = f.rate
	}
	for n := want; n > cur.n; n-- {
		if s := st.b.at(n); !st.banned(s, f.at) {
			return st.change(s, true, fmt.Sprintf("%.0f/s is short at %v (p99 %v, target %v; capacity %.0f/s): %v",
				f.rate, cur, f.p99, st.b.target, f.capacity, s))
		}
	}
	if s := st.b.at(cur.n); st.b.threads && cur.t > 0 && s.t > cur.t && !st.banned(s, f.at) {
		return st.change(s, true, fmt.Sprintf("%.0f/s is short at %v (p99 %v, target %v; capacity %.0f/s) with no instance left to add: %v",
			f.rate, cur, f.p99, st.b.target, f.capacity, s))
	}
	return scaleDecision{}
}

// down gives up one instance (its threads going to the others) when both
// periods say the shape with one fewer, as measured when it ran or else
// in proportion, still carries the rate with downMargin to spare.
func (st *scaleState) down(last []figures, f figures) scaleDecision {
	cur := st.cur
	if cur.n <= st.b.minN {
		return scaleDecision{}
	}
	s := st.b.at(cur.n - 1)
	if st.banned(s, f.at) {
		return scaleDecision{}
	}
	if r, ok := st.shortAt[s]; ok && f.rate*(1+downMargin) > r {
		return scaleDecision{}
	}
	est := 0.0
	for _, p := range last {
		if p.capacity <= 0 || p.p99 > st.b.target {
			return scaleDecision{}
		}
		e := st.known[s]
		if e == 0 {
			e = p.capacity * float64(s.n) / float64(cur.n)
		}
		if e < p.rate*(1+downMargin) {
			return scaleDecision{}
		}
		est = e
	}
	return st.change(s, false, fmt.Sprintf("%.0f/s leaves room at %v (p99 %v, target %v; %v carries about %.0f/s): %v",
		f.rate, cur, f.p99, st.b.target, s, est, s))
}

// change starts a trial of s.
func (st *scaleState) change(s shape, up bool, why string) scaleDecision {
	before := st.seen[max(0, len(st.seen)-3):]
	st.trial = &trial{from: st.cur, up: up, before: summarize(before)}
	return scaleDecision{to: s, change: true, why: why}
}

// applied records that the shape in force is now s (a change made, or a
// revert, whose trial judge already ended), from now: the dwell and the periods judged start again.
func (st *scaleState) applied(s shape, now time.Time) {
	st.cur, st.since, st.seen = s, now, nil
}

// failed records that a change to s could not be made (its reload
// failed): the shape in force stays, s is banned like a worse one.
func (st *scaleState) failed(s shape, now time.Time) {
	st.trial = nil
	st.since, st.seen = now, nil
	bn := st.bans[s]
	bn.strikes = min(bn.strikes+1, maxBanDoublings+1)
	bn.until = now.Add(time.Duration(banDwells<<(bn.strikes-1)) * st.b.dwellTime())
	st.bans[s] = bn
}
