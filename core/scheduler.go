package core

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Scheduler errors, worded as Triton's.
var (
	errQueueFull = Errorf(CodeUnavailable, "Exceeds maximum queue size")
	errExpired   = Errorf(CodeUnavailable, "Request timeout expired")
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
	jobs    []*Job // queue order from head; removed jobs are skipped and compacted
	head    int
	delayed []*Job
	count   int // jobs still queued (not removed)
}

// schedConfig is the scheduling part of a model configuration.
type schedConfig struct {
	batching bool // dynamic_batching present: form batches, apply policies
	maxBS    int64
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
	gather   gatherPlan
	// decoupled models may send after their execution returns.
	decoupled bool
}

func newSchedConfig(cfg *modelconfig.ModelConfig) (schedConfig, []queuePolicy) {
	sc := schedConfig{maxBS: max(1, int64(cfg.GetMaxBatchSize())), enforced: map[string]bool{}}
	sc.gather = newGatherPlan(cfg)
	sc.decoupled = cfg.GetModelTransactionPolicy().GetDecoupled()
	db := cfg.GetDynamicBatching()
	if db == nil {
		// Default scheduler: one FIFO queue, one request per execution.
		return sc, []queuePolicy{{}}
	}
	sc.batching = true
	for _, p := range db.GetPreferredBatchSize() {
		sc.pref = append(sc.pref, int64(p))
	}
	if len(sc.pref) == 0 {
		sc.pref = []int64{sc.maxBS}
	}
	slices.Sort(sc.pref)
	sc.pref = slices.Compact(sc.pref)
	sc.maxPref = sc.pref[len(sc.pref)-1]
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

// executor runs one model version's requests: the scheduler of its
// instances (the default scheduler or the dynamic batcher) or, for an
// ensemble, the ensemble scheduler. loadVersion chooses it.
type executor interface {
	// submit queues j or refuses it synchronously; the job's done channel
	// reports its end.
	submit(j *Job) error
	// close stops taking work and waits for the work taken.
	close()
}

// scheduler feeds one model version's instances. Without dynamic_batching
// it is Triton's default scheduler (FIFO, one request per execution); with
// it, the dynamic batcher (triton-inference-server/server
// docs/user_guide/batcher.md, core src/dynamic_batch_scheduler.cc). Idle instances take
// turns forming the next batch, so a batch is formed only when an instance
// can run it and grows while every instance is busy.
type scheduler struct {
	cfg   schedConfig
	stats *Stats
	insts []Instance
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
	order TakenOrder

	// limits are the instances' rate limiter slots (nil: rate limiting off).
	limits LimitSlots
	// lanes are the instances' lanes for requests run by their callers
	// (direct.go), nil where requests always queue.
	lanes []*lane
}

func newScheduler(cfg *modelconfig.ModelConfig, insts []Instance, limits LimitSlots, stats *Stats, log *slog.Logger) *scheduler {
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

// submit queues j or refuses it synchronously (queue full); a refused
// request is not a failed inference.
func (s *scheduler) submit(j *Job) error {
	lv := s.levels[0]
	if s.cfg.batching {
		lv = s.levels[s.cfg.defLevel]
		if p := j.req.Priority; p >= 1 && p <= uint64(len(s.levels)) {
			lv = s.levels[p-1]
		}
	}
	j.size = max(1, int64(j.req.BatchSize))
	j.level = lv
	pol := lv.policy
	if t := pol.timeout; s.cfg.batching && t > 0 {
		if r := time.Duration(j.req.TimeoutMicros) * time.Microsecond; pol.override && r != 0 && r < t {
			t = r
		}
		j.deadline = j.times.queue.Add(t)
	}

	j.runner = s
	if ln := s.claim(j); ln != nil {
		s.runDirect(ln, j)
		return nil
	}

	// A client that goes away takes its request out of the queue at once.
	if j.ctx.Done() != nil {
		j.stop = context.AfterFunc(j.ctx, func() {
			s.remove(j, &cancelled{context.Cause(j.ctx)})
		})
	}
	j.TraceBegin()
	s.mu.Lock()
	err := s.enqueue(j, lv)
	s.mu.Unlock()
	if err != nil {
		if j.stop != nil {
			j.stop()
		}
		j.TraceEnd(err)
		return err
	}
	s.poke()
	return nil
}

func (s *scheduler) enqueue(j *Job, lv *level) error {
	switch pol := lv.policy; {
	case len(s.insts) == 0:
		// Only passive instances: nothing would ever take the request.
		return Errorf(CodeUnavailable, "no active instance to run the request: every instance group is passive")
	case s.closed:
		return Errorf(CodeUnavailable, "model is unloading")
	case j.ctx.Err() != nil:
		// Cancelled before the hook above could see it queued.
		return Errorf(CodeCancelled, "request cancelled before it was queued")
	case pol.maxSize > 0 && lv.count >= pol.maxSize:
		return errQueueFull
	}
	j.state = jobQueued
	lv.jobs = append(lv.jobs, j)
	lv.count++
	s.stats.AddPending(1)
	if !j.deadline.IsZero() && !lv.policy.delay {
		j.timer = time.AfterFunc(time.Until(j.deadline), func() { s.remove(j, errExpired) })
	}
	return nil
}

// remove answers a still-queued job with err (cancelled or expired).
func (s *scheduler) remove(j *Job, err error) {
	s.mu.Lock()
	if j.state != jobQueued {
		s.mu.Unlock()
		return
	}
	j.state = jobRemoved
	j.level.count--
	s.stats.AddPending(-1)
	s.mu.Unlock()
	if j.timer != nil {
		j.timer.Stop()
	}
	j.TraceEnd(err)
	j.done <- err
	s.poke() // the batch being formed may have changed
}

// worker runs inst's executions. With a lane (ln), it holds the lane from
// taking a batch until it finds no next one; while a direct caller holds
// it, the worker leaves the turn to the others.
func (s *scheduler) worker(inst Instance, ln *lane, limit *LimitSlot) {
	defer s.wg.Done()
	var jobs []*Job
	var e Execution
	var errs []error
	away := s.outOfService(inst)
	for {
		if jobs == nil {
			s.standby(inst)
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
		limit.Acquire(jobs) // waits for the rate limiter's resources, if any
		s.busy.Add(1)
		errs = RunExecution(inst, s.cfg.gather.model, s.cfg.decoupled, s.stats, jobs, s.log, &e, errs)
		s.busy.Add(-1)
		// Take the next batch, if one is due, before answering this one:
		// the answered handlers would otherwise take the CPU while this
		// instance sits idle.
		var next []*Job
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

// standby waits while inst is out of service (Standby), or until the
// scheduler closes: queued work then goes to the other instances.
func (s *scheduler) standby(inst Instance) {
	sb, ok := inst.(Standby)
	if !ok {
		return
	}
	for ch := sb.Standby(); ch != nil; ch = sb.Standby() {
		select {
		case <-ch:
		case <-s.quit:
			return
		}
	}
}

// outOfService is the yield of inst's workers while they wait for work: it
// says when the instance has gone out of service (Standby), so that the
// worker passes the turn on instead of taking work it cannot run; nil when
// the instance never does. Once the scheduler closes it never yields, so
// the queue drains.
func (s *scheduler) outOfService(inst Instance) func() bool {
	sb, ok := inst.(Standby)
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
func (s *scheduler) take(ln *lane) (jobs []*Job, wait time.Duration, closed, claimed bool) {
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
		j.state = jobTaken
		j.level.count--
		j.times.exec = now
	}
	s.stats.AddPending(-int64(len(jobs)))
	if s.cfg.preserve {
		s.order.Taken(jobs...)
	}
	s.mu.Unlock()
	for _, j := range jobs {
		if j.stop != nil {
			j.stop()
		}
		if j.timer != nil {
			j.timer.Stop()
		}
	}
	return jobs, 0, false, false
}

// nextUnless blocks until a batch is due and takes it off the queue (with
// ln, if any: take); nil once the scheduler is closed and drained, or, with
// yielded set, as soon as yield (if any) says so or ln is claimed.
func (s *scheduler) nextUnless(ln *lane, yield func() bool) (jobs []*Job, yielded bool) {
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
func (s *scheduler) answer(jobs []*Job, errs []error) {
	for i, j := range jobs {
		if errs[i] != ErrPending {
			s.finish(j, errs[i])
		}
	}
}

// finish answers j, in queue order when preserve_ordering asks for it
// (with the responses it held back).
func (s *scheduler) finish(j *Job, err error) {
	if !s.cfg.preserve {
		j.TraceEnd(err)
		j.done <- err
		return
	}
	s.order.Finish(j, err)
}

// close stops taking work, lets queued jobs finish and closes the instances.
func (s *scheduler) close() {
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
func (s *scheduler) Keep(*Job, *ExecResponse) error { return nil }

func (s *scheduler) Preserves() bool { return s.cfg.preserve }

func (s *scheduler) Settle(j *Job, err error) {
	s.stats.EndRunning(j)
	s.finish(j, err)
}
