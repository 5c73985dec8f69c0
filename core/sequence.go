package core

import (
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// corrKey is a correlation id as a map key: a number or a string.
type corrKey struct {
	id  uint64
	s   string
	str bool
}

func keyOf(c Correlation) corrKey {
	if c.IsString {
		return corrKey{s: c.StringID, str: true}
	}
	return corrKey{id: c.ID}
}

func (k corrKey) String() string {
	if k.str {
		return k.s
	}
	return strconv.FormatUint(k.id, 10)
}

// seqSlot is one sequence slot of an instance: the requests of the
// sequence bound to it, in arrival order, and the sequence's implicit state.
type seqSlot struct {
	inst  *seqInstance
	idx   int
	queue []*Job
	// reaped: the reaper ended the sequence; the slot is released once the
	// requests it had already taken have run.
	reaped bool

	// state is the sequence's current implicit state, in seqConfig.states
	// order; nil until its START runs. Sends (possibly after the execution,
	// for a decoupled model) write it under smu.
	smu   sync.Mutex
	state []*Tensor
}

// seqInstance is one instance with its slots and its worker's wake-up.
type seqInstance struct {
	inst  Instance
	limit *limitSlot // its rate limiter slot; nil: rate limiting off
	slots []*seqSlot
	wake  chan struct{}

	// order holds, under oldest's preserve_ordering, the requests taken
	// off this instance's slots in the order taken: a request's responses
	// are released once those before it have finished. The order is per
	// instance, as Triton's oldest strategy runs a dynamic batcher per
	// instance (triton-inference-server/core
	// src/sequence_batch_scheduler/sequence_batch_scheduler.cc).
	order takenOrder
}

// backlogged is a sequence waiting for a free slot, with its requests.
type backlogged struct {
	key  corrKey
	jobs []*Job
	// expire is the earliest deadline its requests' timeouts set (zero:
	// none); a sequence still backlogged then is refused.
	expire time.Time
}

// errBacklogExpired answers the requests of a sequence whose timeout
// passed while it waited for a slot, in Triton's words
// (triton-inference-server/core src/sequence_batch_scheduler/sequence_batch_scheduler.cc).
var errBacklogExpired = Errorf(CodeUnavailable, "timeout of the corresponding sequence has been expired")

// seqBatcher is Triton's sequence batcher (triton-inference-server/server
// docs/user_guide/architecture.md "Stateful Models", core
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc): each sequence
// is bound to one slot of one instance from its START to its END (or until
// it sits idle too long); sequences beyond the free slots wait in a FIFO
// backlog. An execution takes at most one request per slot, so a
// sequence's requests run one after the other, in order.
type seqBatcher struct {
	cfg   *seqConfig
	stats *Stats
	log   *slog.Logger
	insts []*seqInstance
	wg    sync.WaitGroup

	mu        sync.Mutex
	active    map[corrKey]*seqSlot
	backlog   []*backlogged
	backlogOf map[corrKey]*backlogged
	free      []*seqSlot
	lastSeen  map[corrKey]time.Time
	reaper    *time.Timer
	armed     bool
	reapAt    time.Time
	quit      chan struct{} // closed by close
	closed    bool
	// stopping: the server is exiting (Server.Stop); new STARTs are
	// refused while the live sequences go on.
	stopping bool
	// retired: a reload replaced this copy and its sequences have ended
	// (sequence_handover.go); a START that reaches it still, having taken
	// it just before the reload, runs on the serving copy, which
	// reacquire holds.
	retired   bool
	reacquire func() (*ModelVersion, func(), error)
	// ids numbers the sequences iterative_sequence starts for requests
	// without a correlation id.
	ids atomic.Uint64
}

func newSeqBatcher(sc *seqConfig, insts []Instance, limits limitSlots, stats *Stats, log *slog.Logger) *seqBatcher {
	b := &seqBatcher{cfg: sc, stats: stats, log: log,
		active: map[corrKey]*seqSlot{}, backlogOf: map[corrKey]*backlogged{}, lastSeen: map[corrKey]time.Time{},
		quit: make(chan struct{})}
	for i, inst := range insts {
		si := &seqInstance{inst: inst, limit: limits.at(i), wake: make(chan struct{}, 1)}
		for k := range sc.slots {
			si.slots = append(si.slots, &seqSlot{inst: si, idx: k})
		}
		b.insts = append(b.insts, si)
	}
	// Free slots are taken lowest index first, instance by instance, so
	// sequences spread over the instances as Triton's slot order does.
	for k := range sc.slots {
		for _, si := range b.insts {
			b.free = append(b.free, si.slots[k])
		}
	}
	slices.Reverse(b.free) // a stack: the next slot to take is last
	for _, si := range b.insts {
		b.wg.Add(1)
		go b.worker(si)
	}
	return b
}

// check refuses a request the sequence batcher cannot take, in Triton's
// words: no correlation id, a correlation id of the wrong type for CORRID,
// or a batch of more than one.
func (b *seqBatcher) check(r *ExecRequest) error {
	c := r.Correlation
	model := b.cfg.model
	if b.cfg.corrid >= 0 {
		want := b.cfg.controls[b.cfg.corrid].dt
		got := ""
		switch {
		case c.IsString && want != TypeBytes:
			got = "BYTES"
		case !c.IsString && want == TypeBytes:
			got = "UINT64"
		}
		if got != "" {
			return Errorf(CodeInvalidArg, "%ssequence batching control '%s' data-type is '%s', but model '%s' expects '%s'",
				RequestPrefix(r.ID), b.cfg.controls[b.cfg.corrid].name, got, model, want)
		}
	}
	if r.BatchSize > 1 {
		return Errorf(CodeInvalidArg, "inference request to model '%s' must specify batch-size 1 due to requirements of sequence batcher", model)
	}
	if c.Missing() {
		return Errorf(CodeInvalidArg, "inference request to model '%s' must specify a non-zero or non-empty correlation ID", model)
	}
	return nil
}

// submit routes j to its sequence's slot, a free slot (START) or the
// backlog, or refuses it synchronously.
func (b *seqBatcher) submit(j *Job) error {
	if b.cfg.iterative && j.req.Correlation.Missing() {
		// A request outside any sequence starts one of its own, as
		// Triton's IterativeSequencer::SetupSequenceRequest
		// (triton-inference-server/core src/sequence_batch_scheduler/sequence_utils.h).
		j.req.Correlation = Correlation{ID: b.ids.Add(1), Flags: FlagSequenceStart}
	}
	if err := b.check(&j.req); err != nil {
		return err
	}
	j.size = max(1, int64(j.req.BatchSize))
	j.runner = b
	b.cfg.addControls(&j.req)
	key := keyOf(j.req.Correlation)
	start := j.req.Correlation.Flags&FlagSequenceStart != 0
	end := j.req.Correlation.Flags&FlagSequenceEnd != 0

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retired && start {
		// Not traced: it runs on the serving copy instead.
		return errRetired
	}
	j.traceBegin()
	slot, inSlot := b.active[key]
	bl, inBacklog := b.backlogOf[key]
	switch {
	case len(b.insts) == 0:
		j.traceEnd(errNoActive)
		return errNoActive
	case b.closed, b.stopping && start:
		err := Errorf(CodeUnavailable, "%s", errStopping)
		j.traceEnd(err)
		return err
	case !start && !inSlot && !inBacklog:
		err := b.startMissing(key)
		j.traceEnd(err)
		return err
	}
	if end {
		// Nothing left to watch: the reaper need not wake for it.
		delete(b.lastSeen, key)
	} else {
		b.touch(key, j.times.queue)
	}
	j.state = jobQueued
	b.stats.addPending(1)
	switch {
	case inSlot:
		// A START here restarts the sequence in its slot (Triton logs the
		// conflict and goes on); its state is reset when it runs.
		b.enqueue(slot, j)
		if end {
			delete(b.active, key)
		}
	case inBacklog:
		bl.jobs = append(bl.jobs, j)
		b.expireAfter(bl, j)
		if end {
			delete(b.backlogOf, key)
		}
	case len(b.free) > 0:
		slot = b.free[len(b.free)-1]
		b.free = b.free[:len(b.free)-1]
		b.enqueue(slot, j)
		if !end {
			b.active[key] = slot
		}
	default:
		bl = &backlogged{key: key, jobs: []*Job{j}}
		b.expireAfter(bl, j)
		b.backlog = append(b.backlog, bl)
		if !end {
			b.backlogOf[key] = bl
		}
	}
	return nil
}

// errNoActive refuses requests to a model whose instances are all passive.
var errNoActive = Errorf(CodeUnavailable, "no active instance to run the request: every instance group is passive")

// enqueue adds j to slot's queue and wakes the slot's worker; b.mu is held.
func (b *seqBatcher) enqueue(slot *seqSlot, j *Job) {
	slot.queue = append(slot.queue, j)
	wake(slot.inst)
}

func wake(si *seqInstance) {
	select {
	case si.wake <- struct{}{}:
	default:
	}
}

// touch records a request for key at now and arms the reaper; b.mu is held.
func (b *seqBatcher) touch(key corrKey, now time.Time) {
	b.lastSeen[key] = now
	b.arm(now.Add(b.cfg.idle))
}

// expireAfter applies j's timeout to its backlogged sequence; b.mu is held.
func (b *seqBatcher) expireAfter(bl *backlogged, j *Job) {
	if j.req.TimeoutMicros == 0 {
		return
	}
	at := j.times.queue.Add(time.Duration(j.req.TimeoutMicros) * time.Microsecond)
	if bl.expire.IsZero() || at.Before(bl.expire) {
		bl.expire = at
		b.arm(at)
	}
}

// arm makes the reaper run at the latest at at; b.mu is held.
func (b *seqBatcher) arm(at time.Time) {
	if b.armed && !at.Before(b.reapAt) {
		return
	}
	b.armed, b.reapAt = true, at
	if b.reaper == nil {
		b.reaper = time.AfterFunc(time.Until(at), b.reap)
	} else {
		b.reaper.Reset(time.Until(at))
	}
}

// reap ends the sequences idle longer than max_sequence_idle_microseconds
// (their slots are released once the requests already queued there have
// run) and refuses the backlogged sequences whose timeout passed. It
// re-arms itself for the next deadline, or not at all when nothing is left
// to watch, so it never spins.
func (b *seqBatcher) reap() {
	b.mu.Lock()
	b.armed = false
	if b.closed {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	var next time.Time
	soonest := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for key, last := range b.lastSeen {
		if at := last.Add(b.cfg.idle); at.After(now) {
			soonest(at)
			continue
		}
		delete(b.lastSeen, key)
		if slot := b.active[key]; slot != nil {
			// Later requests for key now need a START, as in Triton.
			delete(b.active, key)
			b.log.Debug("sequence idle for too long: ended", "correlation_id", key.String())
			slot.reaped = true
			wake(slot.inst)
		}
		// A backlogged sequence is watched again once it holds a slot.
	}
	var expired []*Job
	live := b.backlog[:0]
	for _, bl := range b.backlog {
		switch {
		case bl.expire.IsZero():
		case !bl.expire.After(now):
			if b.backlogOf[bl.key] == bl {
				delete(b.backlogOf, bl.key)
			}
			expired = append(expired, bl.jobs...)
			continue
		default:
			soonest(bl.expire)
		}
		live = append(live, bl)
	}
	clear(b.backlog[len(live):])
	b.backlog = live
	b.stats.addPending(-int64(len(expired)))
	if !next.IsZero() {
		b.arm(next)
	}
	b.mu.Unlock()
	for _, j := range expired {
		b.finish(j, errBacklogExpired)
	}
}

// release frees slot, whose queue is empty, for the next backlogged
// sequence or else the free list; b.mu is held.
func (b *seqBatcher) release(slot *seqSlot) {
	slot.reaped = false
	slot.smu.Lock()
	slot.state = nil
	slot.smu.Unlock()
	if len(b.backlog) == 0 {
		b.free = append(b.free, slot)
		return
	}
	bl := b.backlog[0]
	b.backlog[0] = nil
	b.backlog = b.backlog[1:]
	if b.backlogOf[bl.key] == bl {
		delete(b.backlogOf, bl.key)
		b.active[bl.key] = slot
		b.touch(bl.key, time.Now())
	}
	for _, j := range bl.jobs {
		b.enqueue(slot, j)
	}
}

// worker runs si's executions until the batcher closes and si's slots are
// drained.
func (b *seqBatcher) worker(si *seqInstance) {
	defer b.wg.Done()
	var e Execution
	var errs []error
	var timer *time.Timer
	sb, _ := si.inst.(Standby)
	for {
		b.inService(sb)
		jobs, dropped, wait, done := b.form(si, time.Now())
		for _, d := range dropped {
			b.finish(d.j, d.err)
		}
		if done {
			return
		}
		if jobs == nil {
			var fire <-chan time.Time
			if wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				fire = timer.C
			}
			select {
			case <-si.wake:
			case <-fire:
			}
			continue
		}
		si.limit.acquire(jobs) // waits for the rate limiter's resources, if any
		errs = runExecution(si.inst, b.cfg.model, b.cfg.decoupled, b.stats, jobs, b.log, &e, errs)
		si.limit.release(false)
		var lost []*Job
		b.mu.Lock()
		for i, j := range jobs {
			switch {
			case j.seq == nil: // a not-ready row
			case errs[i] == errRescheduled:
				if !b.requeue(j) {
					lost = append(lost, j)
				}
			case j.req.Correlation.Flags&FlagSequenceEnd != 0:
				b.release(j.seq)
			case b.cfg.iterative:
				b.endIterative(j)
			}
		}
		b.mu.Unlock()
		for i, j := range jobs {
			if j.seq != nil && errs[i] != errPending && errs[i] != errRescheduled {
				b.finish(j, errs[i])
			}
		}
		for _, j := range lost {
			b.finish(j, b.startMissing(keyOf(j.req.Correlation)))
		}
	}
}

// finish answers j; under preserve_ordering a request that ran is
// answered, with the responses it held back, once the requests taken
// before it on its instance are.
func (b *seqBatcher) finish(j *Job, err error) {
	if !b.cfg.preserve || j.state != jobTaken {
		j.traceEnd(err)
		j.done <- err
		return
	}
	j.seq.inst.order.finish(j, err)
}

// close stops taking work, lets queued requests run and closes the
// instances.
func (b *seqBatcher) close() {
	b.mu.Lock()
	b.closed = true
	if b.reaper != nil {
		b.reaper.Stop()
	}
	for _, si := range b.insts {
		select {
		case si.wake <- struct{}{}:
		default:
		}
	}
	b.mu.Unlock()
	close(b.quit)
	b.wg.Wait()
	for _, si := range b.insts {
		if si.limit != nil {
			limitSlots{si.limit}.unregister()
		}
		_ = si.inst.Close()
	}
}

// inService waits while sb (if any) is out of service, or until the
// batcher closes: its sequences wait for it, as a sequence cannot move to
// another instance.
func (b *seqBatcher) inService(sb Standby) {
	if sb == nil {
		return
	}
	for ch := sb.Standby(); ch != nil; ch = sb.Standby() {
		select {
		case <-ch:
		case <-b.quit:
			return
		}
	}
}

// asksFor reports whether the client asked for output name: by name, or by
// asking for every output when the configuration lists it (a state output
// listed under `output` reaches the client only then).
func (j *Job) asksFor(name string) bool {
	if j.orig.Outputs == nil {
		return j.mv.outputs[name] != nil
	}
	return slices.ContainsFunc(j.orig.Outputs, func(o RequestedOutput) bool { return o.Name == name })
}

// stop refuses new STARTs from now on, as Triton's
// SequenceBatchScheduler::Stop, and returns the sequences still live.
func (b *seqBatcher) stop() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopping = true
	return len(b.active) + len(b.backlogOf)
}

// isStopping reports whether stop was called.
func (b *seqBatcher) isStopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopping
}

// startMissing refuses a request of sequence key, which is not live.
func (b *seqBatcher) startMissing(key corrKey) error {
	return Errorf(CodeInvalidArg, "inference request for sequence %s to model '%s' must specify the START flag on the first request of the sequence", key, b.cfg.model)
}

// owns reports whether sequence key is live here.
func (b *seqBatcher) owns(key corrKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, inSlot := b.active[key]
	_, inBacklog := b.backlogOf[key]
	return inSlot || inBacklog
}

// forget ends sequence key as the idle reaper would (its requests already
// queued still run): it starts over elsewhere.
func (b *seqBatcher) forget(key corrKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.lastSeen, key)
	if slot := b.active[key]; slot != nil {
		delete(b.active, key)
		slot.reaped = true
		wake(slot.inst)
	}
	// A backlogged sequence is left alone: it ends as usual once it holds
	// a slot.
}

// keep takes the state outputs of a sequence's request out of resp (see
// seqSlot.keep).
func (b *seqBatcher) keep(j *Job, resp *ExecResponse) error {
	if j.seq == nil {
		return nil
	}
	return j.seq.keep(b.cfg, resp, j.asksFor)
}

func (b *seqBatcher) preserves() bool { return b.cfg.preserve }

func (b *seqBatcher) settle(j *Job, err error) {
	b.stats.endRunning(j)
	b.finish(j, err)
}
