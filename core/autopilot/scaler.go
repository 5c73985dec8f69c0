package autopilot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// retuneTimeout bounds one reload of a model by the scaler: Python
// workers and ONNX Runtime sessions start within it.
const retuneTimeout = 5 * time.Minute

// onnxBackend is the backend whose intra-op threads the scaler splits
// (core/onnxrt's Name; the autopilot does not import the backend).
const onnxBackend = "onnxruntime"

// scaler is one model's instance scaler at run time: the state it keeps
// across its own reloads, the watch whose figures it follows, and the
// reload in flight. A user's load or unload of the model starts a new one.
type scaler struct {
	p    *Pilot
	name string
	log  *slog.Logger
	keep int

	// Under p.mu: the state and the versions it follows.
	st *scaleState
	// cur is the watch the scaler follows, of version mv; watches are
	// every live watch it was attached to, by version.
	cur     *watch
	mv      *core.ModelVersion
	tuner   core.Tuner
	watches map[*watch]int64
	// pending is the shape a reload in flight is loading (nil: none).
	pending *shape
	// retired is set once a user's load replaced the scaler.
	retired bool
	// noted is the last note logged instead of a change, so that a
	// holding reason is logged once.
	noted string
	// history is the scaler's decisions and those of the watches its
	// reloads replaced, oldest first.
	history []core.SLODecision
}

// scaleBoundsOf reads what mv's config lets the scaler do, and the shape
// in force; why says why it is left alone ("" when it is not).
func scaleBoundsOf(cfg *modelconfig.ModelConfig, t Target) (scaleBounds, shape, string) {
	groups := cfg.GetInstanceGroup()
	if len(groups) != 1 {
		return scaleBounds{}, shape{}, fmt.Sprintf("%d instance groups; the autopilot scales one", len(groups))
	}
	g := groups[0]
	switch {
	case g.GetKind() != modelconfig.ModelInstanceGroup_KIND_CPU:
		return scaleBounds{}, shape{}, g.GetKind().String() + " instances: the count is left as configured"
	case g.GetPassive():
		return scaleBounds{}, shape{}, "passive instances"
	}
	count := int(g.GetCount())
	b := scaleBounds{maxN: count, minN: min(max(t.MinInstances, 1), count), cpus: t.MaxCPUs,
		target: t.P99, period: t.Period, dwell: t.Dwell}
	if b.cpus == 0 {
		b.cpus = runtime.GOMAXPROCS(0)
	}
	if b.dwell == 0 {
		b.dwell = DefaultDwell
	}
	b.threads = cfg.GetBackend() == onnxBackend && !boolParam(cfg, "share_session_between_instances")
	cur, _ := shapeOf(cfg, b)
	if b.minN == b.maxN && !b.threads {
		return scaleBounds{}, shape{}, fmt.Sprintf("count %d and %s %d leave no choice", count, ParamMinInstances, b.minN)
	}
	return b, cur, ""
}

// shapeOf is the shape cfg sets, read as bounds b read it; false when
// cfg has not the one CPU instance group a scaler tunes.
func shapeOf(cfg *modelconfig.ModelConfig, b scaleBounds) (shape, bool) {
	groups := cfg.GetInstanceGroup()
	if len(groups) != 1 || groups[0].GetKind() != modelconfig.ModelInstanceGroup_KIND_CPU {
		return shape{}, false
	}
	s := shape{n: int(groups[0].GetCount())}
	if b.threads {
		s.t = intraOpThreads(cfg)
	}
	return s, true
}

// paramIntraOp is ONNX Runtime's intra-op thread count in a config
// (core/onnxrt's parameter, as Triton's onnxruntime backend names it).
const paramIntraOp = "intra_op_thread_count"

// intraOpThreads is the config's intra-op thread count (0: unset or not
// a number).
func intraOpThreads(cfg *modelconfig.ModelConfig) int {
	n, _ := strconv.Atoi(cfg.GetParameters()[paramIntraOp].GetStringValue())
	return n
}

func boolParam(cfg *modelconfig.ModelConfig, key string) bool {
	v, _ := strconv.ParseBool(cfg.GetParameters()[key].GetStringValue())
	return v
}

// retuned is cfg with shape s and the batching in force, for the reload
// that sets s: the new copy starts where the batching was tuned to (the
// cap, which no config field holds, its watch sets again). With threads
// (the scaler splits intra-op threads), a shape of t 0, the first
// config's where it set none, takes the parameter out again: kept, it
// made a revert to that shape a copy of its own, neither the shape asked
// for nor one the scaler follows.
func retuned(cfg *modelconfig.ModelConfig, s shape, tu core.BatchTuning, threads bool) *modelconfig.ModelConfig {
	c := proto.Clone(cfg).(*modelconfig.ModelConfig)
	c.InstanceGroup[0].Count = int32(s.n)
	switch {
	case s.t > 0:
		if c.Parameters == nil {
			c.Parameters = map[string]*modelconfig.ModelParameter{}
		}
		c.Parameters[paramIntraOp] = &modelconfig.ModelParameter{StringValue: strconv.Itoa(s.t)}
	case threads:
		delete(c.Parameters, paramIntraOp)
	}
	if db := c.GetDynamicBatching(); db != nil && len(tu.Preferred) > 0 {
		tu.Apply(db)
	}
	return c
}

// attach gives the scaler of mv's model the watch wt: the one a reload of
// its own brought (its state goes on), else a new scaler (a user's load).
// It returns what the core holds: wt with the instances in its report.
func (p *Pilot) attach(mv *core.ModelVersion, wt *watch, tuner core.Tuner, t Target, log *slog.Logger) core.SLOWatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := mv.Namespace + "/" + mv.Name
	sc := p.scalers[key]
	b, cur, why := scaleBoundsOf(mv.Config, t)
	if sc != nil && !sc.retired && sc.pending != nil {
		// The reload of its own: the bounds are the first config's.
		if s, ok := shapeOf(mv.Config, sc.st.b); ok && s == *sc.pending {
			sc.handover(mv, wt, tuner)
			wt.onPeriod = func(f figures) { sc.observe(wt, f) }
			return &scaledWatch{watch: wt, sc: sc, shape: s}
		}
	}
	switch {
	case why != "":
		log.Info("autopilot: instances not tuned", "why", why)
		if sc != nil {
			sc.retired = true
			delete(p.scalers, key)
		}
		return wt
	case sc != nil && !sc.retired && !sc.follows(mv.Version):
		// Another version of the model: several serve, and the scaler,
		// which reloads them all, holds (scaler.observe).
		sc.watches[wt] = mv.Version
	default:
		if sc != nil {
			sc.retired = true
		}
		sc = &scaler{p: p, name: key, log: log, keep: p.opts.History, st: newScaleState(b, cur, time.Now()),
			cur: wt, mv: mv, tuner: tuner, watches: map[*watch]int64{wt: mv.Version}}
		p.scalers[key] = sc
		log.Info("autopilot: instances tuned", "instances", cur.n, "intra_op_threads", cur.t, "min_instances", b.minN,
			"max_instances", b.maxN, "cpus", b.cpus, "dwell_periods", b.dwell)
	}
	wt.onPeriod = func(f figures) { sc.observe(wt, f) }
	return &scaledWatch{watch: wt, sc: sc, shape: cur}
}

// follows says the scaler already follows a watch of version v.
func (sc *scaler) follows(v int64) bool {
	for _, have := range sc.watches {
		if have == v {
			return true
		}
	}
	return false
}

// handover moves the scaler onto the copy its reload brought (under
// p.mu): the dwell starts now, and the replaced watch's decisions go into
// the history.
func (sc *scaler) handover(mv *core.ModelVersion, wt *watch, tuner core.Tuner) {
	sc.history = append(sc.history, sc.cur.Report().Decisions...)
	sc.trim()
	sc.cur, sc.mv, sc.tuner = wt, mv, tuner
	sc.watches[wt] = mv.Version
	sc.st.applied(*sc.pending, time.Now())
	sc.pending = nil
}

func (sc *scaler) trim() {
	slices.SortStableFunc(sc.history, func(a, b core.SLODecision) int { return a.At.Compare(b.At) })
	if len(sc.history) > sc.keep {
		sc.history = slices.Delete(sc.history, 0, len(sc.history)-sc.keep)
	}
}

// observe takes one period's figures from watch w, decides, and starts
// the reload a change needs.
func (sc *scaler) observe(w *watch, f figures) {
	p := sc.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if sc.retired || w != sc.cur || sc.pending != nil {
		return
	}
	if len(slices.Compact(slices.Sorted(maps.Values(sc.watches)))) > 1 {
		sc.note("several versions serve: instances left as they are")
		return
	}
	d := sc.st.next(f)
	switch {
	case d.change:
		sc.start(d, f)
	case d.why != "":
		sc.note(d.why)
	}
}

func (sc *scaler) note(why string) {
	if why == sc.noted {
		return
	}
	sc.noted = why
	sc.log.Info("autopilot instances", "decision", why)
}

// start logs and records decision d and starts its reload (under p.mu).
func (sc *scaler) start(d scaleDecision, f figures) {
	from := sc.st.cur
	tu := sc.tuner.Tuning()
	sc.log.Info("autopilot instances", "decision", d.why, "instances", d.to.n, "intra_op_threads", d.to.t,
		"from_instances", from.n, "from_intra_op_threads", from.t, "p99_ms", ms(f.p99), "rate", round1(f.rate),
		"capacity", round1(f.capacity), "cpu_bound", f.cpuBound, "revert", d.revert)
	sc.noted = ""
	// The batching stays as it is, its cap shown as the reports show it.
	kept := bounds{maxBS: int64(sc.mv.Config.GetMaxBatchSize())}.effective(tu)
	rec := core.SLODecision{At: f.at, To: kept, From: kept}
	rec.Reason, rec.MeasuredP99, rec.RatePerSec, rec.Capacity = d.why, f.p99, f.rate, f.capacity
	rec.Instances, rec.FromInstances, rec.Threads, rec.FromThreads = d.to.n, from.n, d.to.t, from.t
	sc.history = append(sc.history, rec)
	sc.trim()
	p := sc.p
	if p.reload == nil || p.closed {
		sc.st.failed(d.to, f.at)
		sc.log.Warn("autopilot instances: no reload possible (the pilot is not bound to a server, or closed)")
		return
	}
	to := d.to
	sc.pending = &to
	cfg := retuned(sc.mv.Config, to, tu, sc.st.b.threads)
	mv := sc.mv
	p.wg.Go(func() {
		ctx, cancel := context.WithTimeout(p.ctx, retuneTimeout)
		defer cancel()
		err := p.reload.Retune(ctx, mv, cfg)
		p.mu.Lock()
		defer p.mu.Unlock()
		if sc.pending == nil || *sc.pending != to {
			return // handed over
		}
		sc.pending = nil
		if err == nil {
			err = errors.New("the reload brought no watched copy")
		}
		sc.st.failed(to, time.Now())
		sc.log.Warn("autopilot instances: reload failed; the serving copy stays", "instances", to.n, "intra_op_threads", to.t, "err", err)
		if len(sc.watches) == 0 && p.scalers[sc.name] == sc {
			delete(p.scalers, sc.name) // unloaded meanwhile
		}
	})
}

// detach is the end of watch w (its version closed).
func (sc *scaler) detach(w *watch) {
	p := sc.p
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(sc.watches, w)
	if len(sc.watches) == 0 && sc.pending == nil && p.scalers[sc.name] == sc {
		delete(p.scalers, sc.name)
	}
}

// scaledWatch is a watch whose model's instances a scaler tunes: its
// report shows the instances of its version and the scaler's decisions.
type scaledWatch struct {
	*watch
	sc    *scaler
	shape shape
}

func (s *scaledWatch) Stop() {
	s.watch.Stop()
	s.sc.detach(s.watch)
}

func (s *scaledWatch) Report() core.SLOReport {
	r := s.watch.Report()
	r.Instances, r.Threads = s.shape.n, s.shape.t
	p := s.sc.p
	p.mu.Lock()
	all := append(slices.Clone(s.sc.history), r.Decisions...)
	p.mu.Unlock()
	slices.SortStableFunc(all, func(a, b core.SLODecision) int { return a.At.Compare(b.At) })
	if len(all) > s.sc.keep {
		all = slices.Delete(all, 0, len(all)-s.sc.keep)
	}
	r.Decisions = all
	return r
}
