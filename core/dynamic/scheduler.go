package dynamic

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/padbatch"
	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Batchers makes the default scheduler or dynamic batcher of each version
// that neither sequence batches nor is an ensemble: a server's
// core.Options.Batching.
type Batchers struct{}

// New makes the scheduler of one version over its active instances
// (core.Batching).
func (Batchers) New(cfg *modelconfig.ModelConfig, insts []core.Instance, limits ratelimit.Slots, stats *core.Stats, log *slog.Logger) core.BatchScheduler {
	return newScheduler(cfg, insts, limits, stats, log)
}

// Scheduler errors, worded as Triton's.
var (
	errQueueFull = core.Errorf(core.CodeUnavailable, "Exceeds maximum queue size")
	errExpired   = core.Errorf(core.CodeUnavailable, "Request timeout expired")
)

// queuePolicy is one priority level's ModelQueuePolicy.
type queuePolicy struct {
	delay    bool // timeout_action DELAY (else REJECT)
	timeout  time.Duration
	override bool
	maxSize  int
}

// level is one priority level's queue: FIFO, with requests that timed out
// under DELAY kept after the others.
type level struct {
	policy  queuePolicy
	jobs    []*core.Job // queue order from head; removed jobs are skipped and compacted
	head    int
	delayed []*core.Job
	count   int // jobs still queued (not removed)
}

// schedConfig is the scheduling part of a model configuration.
type schedConfig struct {
	batching bool // dynamic_batching present: form batches, apply policies
	maxBS    int64
	// cap, when set (by Tune), bounds a batch's rows below maxBS.
	cap      int64
	pref     []int64 // sorted preferred batch sizes
	maxPref  int64
	delay    time.Duration
	preserve bool
	defLevel int // index into levels of default_priority_level
	// enforced are the inputs whose shapes must agree inside a batch:
	// variable dims and not ragged (see compatible). sameSet: the model has optional
	// inputs, so requests must also bring the same inputs.
	enforced map[string]bool
	sameSet  bool
	model    string
	// decoupled models may send after their execution returns.
	decoupled bool
	// pad: inputs whose last dim may differ inside a batch (the gather
	// pads them) and the token budget (padbatch); nil: none.
	pad *padbatch.Spec
}

// setPreferred sets the preferred batch sizes, sorted and unique; sizes
// outside 1 to the batch limit are dropped (the config's are checked at
// load; Tune's come from the autopilot), and none left means the limit,
// as in a config without preferred sizes.
func (sc *schedConfig) setPreferred(sizes []int64) {
	var pref []int64
	for _, p := range sizes {
		if p >= 1 && p <= sc.limit() {
			pref = append(pref, p)
		}
	}
	if len(pref) == 0 {
		pref = []int64{sc.limit()}
	}
	slices.Sort(pref)
	sc.pref = slices.Compact(pref)
	sc.maxPref = sc.pref[len(sc.pref)-1]
}

// limit is the most rows a batch takes: the cap when one is set, else
// max_batch_size.
func (sc *schedConfig) limit() int64 {
	if sc.cap > 0 {
		return sc.cap
	}
	return sc.maxBS
}

func newSchedConfig(cfg *modelconfig.ModelConfig) (schedConfig, []queuePolicy) {
	sc := schedConfig{maxBS: max(1, int64(cfg.GetMaxBatchSize())), enforced: map[string]bool{}}
	sc.model = cfg.GetName()
	sc.decoupled = cfg.GetModelTransactionPolicy().GetDecoupled()
	db := cfg.GetDynamicBatching()
	if db == nil {
		// Default scheduler: one FIFO queue, one request per execution.
		return sc, []queuePolicy{{}}
	}
	sc.batching = true
	sc.pad, _ = padbatch.Parse(cfg) // checked at load (core's completeConfig)
	var pref []int64
	for _, p := range db.GetPreferredBatchSize() {
		pref = append(pref, int64(p))
	}
	sc.setPreferred(pref)
	sc.delay = time.Duration(db.GetMaxQueueDelayMicroseconds()) * time.Microsecond
	sc.preserve = db.GetPreserveOrdering()
	for _, in := range cfg.GetInput() {
		if in.GetOptional() {
			sc.sameSet = true
		}
		if slices.Contains(in.GetDims(), -1) && !in.GetAllowRaggedBatch() {
			sc.enforced[in.GetName()] = true
		}
	}
	toPolicy := func(p *modelconfig.ModelQueuePolicy) queuePolicy {
		return queuePolicy{
			delay:    p.GetTimeoutAction() == modelconfig.ModelQueuePolicy_DELAY,
			timeout:  time.Duration(p.GetDefaultTimeoutMicroseconds()) * time.Microsecond,
			override: p.GetAllowTimeoutOverride(),
			maxSize:  int(p.GetMaxQueueSize()),
		}
	}
	def := toPolicy(db.GetDefaultQueuePolicy())
	n := int(db.GetPriorityLevels())
	if n == 0 {
		return sc, []queuePolicy{def}
	}
	policies := make([]queuePolicy, n)
	for i := range policies {
		policies[i] = def
		if p, ok := db.GetPriorityQueuePolicy()[uint64(i+1)]; ok {
			policies[i] = toPolicy(p)
		}
	}
	sc.defLevel = max(int(db.GetDefaultPriorityLevel())-1, 0)
	return sc, policies
}

// scheduler feeds one model version's instances. Without dynamic_batching
// it is Triton's default scheduler (FIFO, one request per execution); with
// it, the dynamic batcher (triton-inference-server/server
// docs/user_guide/batcher.md, core src/dynamic_batch_scheduler.cc). Idle instances take
// turns forming the next batch, so a batch is formed only when an instance
// can run it and grows while every instance is busy.
type scheduler struct {
	cfg   schedConfig
	stats *core.Stats
	insts []core.Instance
	log   *slog.Logger

	mu     sync.Mutex
	levels []*level
	closed bool

	arrive chan struct{} // poked on enqueue, cancel, close and delay expiry
	wakeAt atomic.Int64  // unix ns of the pending precise wake-up, 0: none
	turn   chan struct{} // held by the one instance forming a batch
	wg     sync.WaitGroup
	busy   atomic.Int32    // instances executing now (Load's instance_utilization)
	idle   atomic.Int32    // instances waiting for work (see pipeline)
	pipes  []chan struct{} // wake the pipeline workers (see pipeline)
	quit   chan struct{}   // closed by close: pipeline workers exit

	// preserve_ordering: jobs in the order they left the queue.
	order core.TakenOrder

	// limits are the instances' rate limiter slots (nil: rate limiting off).
	limits ratelimit.Slots
	// lanes are the instances' lanes for requests run by their callers
	// (direct.go), nil where requests always queue.
	lanes []*lane
}

func newScheduler(cfg *modelconfig.ModelConfig, insts []core.Instance, limits ratelimit.Slots, stats *core.Stats, log *slog.Logger) *scheduler {
	sc, policies := newSchedConfig(cfg)
	s := &scheduler{cfg: sc, stats: stats, insts: insts, log: log, limits: limits,
		arrive: make(chan struct{}, 1), turn: make(chan struct{}, 1), quit: make(chan struct{})}
	for _, p := range policies {
		s.levels = append(s.levels, &level{policy: p})
	}
	s.turn <- struct{}{}
	s.lanes = lanesFor(sc, insts, limits)
	if limits == nil {
		// Under the rate limiter an instance runs one execution at a
		// time, as Triton's: no pipelining.
		for _, inst := range insts {
			s.pipelined(inst)
		}
	}
	for i, inst := range insts {
		var ln *lane
		if s.lanes != nil {
			ln = s.lanes[i]
		}
		s.wg.Add(1)
		go s.worker(inst, ln, limits.At(i))
	}
	return s
}

func (s *scheduler) poke() {
	select {
	case s.arrive <- struct{}{}:
	default:
	}
}

// Submit queues j or refuses it synchronously (queue full); a refused
// request is not a failed inference.
func (s *scheduler) Submit(j *core.Job) error {
	r := j.Request()
	idx := 0
	if s.cfg.batching {
		idx = s.cfg.defLevel
		if p := r.Priority; p >= 1 && p <= uint64(len(s.levels)) {
			idx = int(p - 1)
		}
	}
	lv := s.levels[idx]
	j.Accept(s)
	j.Queue.Level = idx
	pol := lv.policy
	if t := pol.timeout; s.cfg.batching && t > 0 {
		if rt := time.Duration(r.TimeoutMicros) * time.Microsecond; pol.override && rt != 0 && rt < t {
			t = rt
		}
		j.Queue.Deadline = j.QueuedAt().Add(t)
	}

	if ln := s.claim(j); ln != nil {
		s.runDirect(ln, j)
		return nil
	}

	// A client that goes away takes its request out of the queue at once.
	if ctx := j.Context(); ctx.Done() != nil {
		j.Queue.Stop = context.AfterFunc(ctx, func() {
			s.remove(j, core.Cancelled(ctx))
		})
	}
	j.TraceBegin()
	s.mu.Lock()
	err := s.enqueue(j, lv)
	s.mu.Unlock()
	if err != nil {
		if j.Queue.Stop != nil {
			j.Queue.Stop()
		}
		j.TraceEnd(err)
		return err
	}
	s.poke()
	return nil
}

func (s *scheduler) enqueue(j *core.Job, lv *level) error {
	switch pol := lv.policy; {
	case len(s.insts) == 0:
		// Only passive instances: nothing would ever take the request.
		return core.Errorf(core.CodeUnavailable, "no active instance to run the request: every instance group is passive")
	case s.closed:
		return core.Errorf(core.CodeUnavailable, "model is unloading")
	case j.Context().Err() != nil:
		// Cancelled before the hook above could see it queued.
		return core.Errorf(core.CodeCancelled, "request cancelled before it was queued")
	case pol.maxSize > 0 && lv.count >= pol.maxSize:
		return errQueueFull
	}
	j.MarkQueued()
	lv.jobs = append(lv.jobs, j)
	lv.count++
	s.stats.AddPending(1)
	if d := j.Queue.Deadline; !d.IsZero() && !lv.policy.delay {
		j.Queue.Timer = time.AfterFunc(time.Until(d), func() { s.remove(j, core.Expired(errExpired)) })
	}
	return nil
}

// remove answers a still-queued job with err (cancelled or expired).
func (s *scheduler) remove(j *core.Job, err error) {
	s.mu.Lock()
	if !j.Waiting() {
		s.mu.Unlock()
		return
	}
	j.MarkRemoved()
	s.levels[j.Queue.Level].count--
	s.stats.AddPending(-1)
	s.mu.Unlock()
	if j.Queue.Timer != nil {
		j.Queue.Timer.Stop()
	}
	j.End(err)
	s.poke() // the batch being formed may have changed
}

// worker runs inst's executions. With a lane (ln), it holds the lane from
// taking a batch until it finds no next one; while a direct caller holds
// it, the worker leaves the turn to the others.
func (s *scheduler) worker(inst core.Instance, ln *lane, limit *ratelimit.Slot) {
	defer s.wg.Done()
	var jobs []*core.Job
	var e core.Execution
	var errs []error
	away := s.outOfService(inst)
	for {
		if jobs == nil {
			// Out of service: queued work goes to the other instances.
			core.AwaitService(inst, s.quit)
			ln.await()
			s.idle.Add(1)
			<-s.turn
			var yielded bool
			jobs, yielded = s.nextUnless(ln, away)
			s.idle.Add(-1) // before the turn passes: a pipeline worker takes it next
			s.turn <- struct{}{}
			if jobs == nil {
				if yielded {
					continue // out of service, or its lane claimed, while it waited for work
				}
				return
			}
		}
		s.wakePipelines()
		core.AcquireFor(limit, jobs)
		s.busy.Add(1)
		errs = core.RunExecution(inst, s.cfg.model, s.cfg.decoupled, s.stats, jobs, s.log, &e, errs)
		s.busy.Add(-1)
		// Take the next batch, if one is due, before answering this one:
		// the answered handlers would otherwise take the CPU while this
		// instance sits idle.
		var next []*core.Job
		select {
		case <-s.turn:
			next, _, _, _ = s.take(nil) // the lane is the worker's still
			s.turn <- struct{}{}
		default:
		}
		if next == nil && ln != nil {
			ln.busy.Store(false)
		}
		limit.Release(next != nil)
		s.answer(jobs, errs)
		jobs = next
	}
}

// outOfService is the yield of inst's workers while they wait for work: it
// says when the instance has gone out of service (Standby), so that the
// worker passes the turn on instead of taking work it cannot run; nil when
// the instance never does. Once the scheduler closes it never yields, so
// the queue drains.
func (s *scheduler) outOfService(inst core.Instance) func() bool {
	sb, ok := inst.(core.Standby)
	if !ok {
		return nil
	}
	return func() bool {
		select {
		case <-s.quit:
			return false
		default:
			return sb.Standby() != nil
		}
	}
}

// take takes the batch that is due now off the queue, or says how long to
// wait (< 0: for an arrival) and whether the scheduler is closed and empty.
// With a lane, it takes the lane with the batch, or takes nothing and says
// so (claimed) while a direct caller holds it.
func (s *scheduler) take(ln *lane) (jobs []*core.Job, wait time.Duration, closed, claimed bool) {
	s.mu.Lock()
	jobs, wait = s.form(time.Now())
	if jobs == nil {
		closed = s.closed && wait < 0
		s.mu.Unlock()
		return nil, wait, closed, false
	}
	if ln != nil {
		if ln.busy.Load() {
			s.mu.Unlock()
			return nil, 0, false, true
		}
		ln.busy.Store(true)
	}
	now := time.Now()
	for _, j := range jobs {
		j.MarkTaken(now)
		s.levels[j.Queue.Level].count--
	}
	s.stats.AddPending(-int64(len(jobs)))
	if s.cfg.preserve {
		s.order.Taken(jobs...)
	}
	s.mu.Unlock()
	for _, j := range jobs {
		if j.Queue.Stop != nil {
			j.Queue.Stop()
		}
		if j.Queue.Timer != nil {
			j.Queue.Timer.Stop()
		}
	}
	return jobs, 0, false, false
}

// nextUnless blocks until a batch is due and takes it off the queue (with
// ln, if any: take); nil once the scheduler is closed and drained, or, with
// yielded set, as soon as yield (if any) says so or ln is claimed.
func (s *scheduler) nextUnless(ln *lane, yield func() bool) (jobs []*core.Job, yielded bool) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if yield != nil && yield() {
			return nil, true
		}
		jobs, wait, closed, claimed := s.take(ln)
		if claimed {
			return nil, true
		}
		if jobs != nil || closed {
			return jobs, false
		}
		var fire <-chan time.Time
		switch {
		case wait >= preciseBelow:
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		case wait > 0:
			s.wakeIn(wait)
		}
		select {
		case <-s.arrive:
		case <-fire:
		}
	}
}

// preciseBelow is the delay under which the batcher sleeps on the kernel's
// timer instead of the runtime's (see sleepPrecise).
const preciseBelow = 2 * time.Millisecond

// wakeIn pokes the forming instance after d, unless a sleeper already
// will as soon. Stale sleepers only cause a harmless re-evaluation.
func (s *scheduler) wakeIn(d time.Duration) {
	at := time.Now().Add(d).UnixNano()
	if w := s.wakeAt.Load(); w != 0 && w <= at {
		return
	}
	s.wakeAt.Store(at)
	go func() {
		sleepPrecise(d)
		s.wakeAt.CompareAndSwap(at, 0)
		s.poke()
	}()
}

// answer finishes the jobs of an execution by how each ended (errs, from
// RunExecution), but for decoupled requests still sending: their final
// send finishes them.
func (s *scheduler) answer(jobs []*core.Job, errs []error) {
	for i, j := range jobs {
		if errs[i] != core.ErrPending {
			s.finish(j, errs[i])
		}
	}
}

// finish answers j, in queue order when preserve_ordering asks for it
// (with the responses it held back).
func (s *scheduler) finish(j *core.Job, err error) {
	if !s.cfg.preserve {
		j.End(err)
		return
	}
	s.order.Finish(j, err)
}

// Close stops taking work, lets queued jobs finish and closes the instances.
func (s *scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	// The worker forming a batch wakes, finds the queue closed and empty,
	// and passes the turn on; each later worker checks before it waits.
	s.poke()
	s.wg.Wait()
	s.limits.Unregister()
	for _, inst := range s.insts {
		_ = inst.Close()
	}
}

// Keep passes every response on: the scheduler keeps nothing of them.
func (s *scheduler) Keep(*core.Job, *core.ExecResponse) error { return nil }

func (s *scheduler) Preserves() bool { return s.cfg.preserve }

func (s *scheduler) Settle(j *core.Job, err error) {
	s.stats.EndRunning(j)
	s.finish(j, err)
}

// Load is how many active instances s feeds and how many run an execution
// now (core.BatchScheduler).
func (s *scheduler) Load() (instances, busy int) { return len(s.insts), int(s.busy.Load()) }

// Order is s's preserve_ordering queue, nil without preserve_ordering.
func (s *scheduler) Order() *core.TakenOrder {
	if !s.cfg.preserve {
		return nil
	}
	return &s.order
}
