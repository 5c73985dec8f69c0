package sequence

import (
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/ratelimit"
)

// corrKey is a correlation id as a map key: a number or a string.
type corrKey struct {
	id  uint64
	s   string
	str bool
}

func keyOf(c core.Correlation) corrKey {
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
	queue []*core.Job
	// reaped: the reaper ended the sequence; the slot is released once the
	// requests it had already taken have run.
	reaped bool

	// state is the sequence's current implicit state, in seqConfig.states
	// order; nil until its START runs. Sends (possibly after the execution,
	// for a decoupled model) write it under smu.
	smu   sync.Mutex
	state []*core.Tensor
}

// seqInstance is one instance with its slots and its worker's wake-up.
type seqInstance struct {
	inst  core.Instance
	limit *ratelimit.Slot // its rate limiter slot; nil: rate limiting off
	slots []*seqSlot
	wake  chan struct{}

	// order holds, under oldest's preserve_ordering, the requests taken
	// off this instance's slots in the order taken: a request's responses
	// are released once those before it have finished. The order is per
	// instance, as Triton's oldest strategy runs a dynamic batcher per
	// instance (triton-inference-server/core
	// src/sequence_batch_scheduler/sequence_batch_scheduler.cc).
	order core.TakenOrder
}

// backlogged is a sequence waiting for a free slot, with its requests.
type backlogged struct {
	key  corrKey
	jobs []*core.Job
	// expire is the earliest deadline its requests' timeouts set (zero:
	// none); a sequence still backlogged then is refused.
	expire time.Time
}

// errBacklogExpired answers the requests of a sequence whose timeout
// passed while it waited for a slot, in Triton's words
// (triton-inference-server/core src/sequence_batch_scheduler/sequence_batch_scheduler.cc).
var errBacklogExpired = core.Errorf(core.CodeUnavailable, "timeout of the corresponding sequence has been expired")

// seqBatcher is Triton's sequence batcher (triton-inference-server/server
// docs/user_guide/architecture.md "Stateful Models", core
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc): each sequence
// is bound to one slot of one instance from its START to its END (or until
// it sits idle too long); sequences beyond the free slots wait in a FIFO
// backlog. An execution takes at most one request per slot, so a
// sequence's requests run one after the other, in order.
type seqBatcher struct {
	cfg   *seqConfig
	stats *core.Stats
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
	// (Retire; the core's handover.go); a START that reaches it still,
	// having taken it just before the reload, runs on the serving copy.
	retired bool
	// ids numbers the sequences iterative_sequence starts for requests
	// without a correlation id.
	ids atomic.Uint64
}

func newSeqBatcher(sc *seqConfig, insts []core.Instance, limits ratelimit.Slots, stats *core.Stats, log *slog.Logger) *seqBatcher {
	b := &seqBatcher{cfg: sc, stats: stats, log: log,
		active: map[corrKey]*seqSlot{}, backlogOf: map[corrKey]*backlogged{}, lastSeen: map[corrKey]time.Time{},
		quit: make(chan struct{})}
	for i, inst := range insts {
		si := &seqInstance{inst: inst, limit: limits.At(i), wake: make(chan struct{}, 1)}
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
func (b *seqBatcher) check(r *core.ExecRequest) error {
	c := r.Correlation
	model := b.cfg.model
	if b.cfg.corrid >= 0 {
		want := b.cfg.controls[b.cfg.corrid].dt
		got := ""
		switch {
		case c.IsString && want != core.TypeBytes:
			got = "BYTES"
		case !c.IsString && want == core.TypeBytes:
			got = "UINT64"
		}
		if got != "" {
			return core.Errorf(core.CodeInvalidArg, "%ssequence batching control '%s' data-type is '%s', but model '%s' expects '%s'",
				core.RequestPrefix(r.ID), b.cfg.controls[b.cfg.corrid].name, got, model, want)
		}
	}
	if r.BatchSize > 1 {
		return core.Errorf(core.CodeInvalidArg, "inference request to model '%s' must specify batch-size 1 due to requirements of sequence batcher", model)
	}
	if c.Missing() {
		return core.Errorf(core.CodeInvalidArg, "inference request to model '%s' must specify a non-zero or non-empty correlation ID", model)
	}
	return nil
}

// Submit routes j to its sequence's slot, a free slot (START) or the
// backlog, or refuses it synchronously.
func (b *seqBatcher) Submit(j *core.Job) error {
	if b.cfg.iterative && j.Request().Correlation.Missing() {
		// A request outside any sequence starts one of its own, as
		// Triton's IterativeSequencer::SetupSequenceRequest
		// (triton-inference-server/core src/sequence_batch_scheduler/sequence_utils.h).
		j.Request().Correlation = core.Correlation{ID: b.ids.Add(1), Flags: core.FlagSequenceStart}
	}
	if err := b.check(j.Request()); err != nil {
		return err
	}
	j.Accept(b)
	b.cfg.addControls(j.Request())
	key := keyOf(j.Request().Correlation)
	start := j.Request().Correlation.Flags&core.FlagSequenceStart != 0
	end := j.Request().Correlation.Flags&core.FlagSequenceEnd != 0

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retired && start {
		// Not traced: it runs on the serving copy instead.
		return core.ErrRetired
	}
	j.TraceBegin()
	slot, inSlot := b.active[key]
	bl, inBacklog := b.backlogOf[key]
	switch {
	case len(b.insts) == 0:
		j.TraceEnd(errNoActive)
		return errNoActive
	case b.closed, b.stopping && start:
		j.TraceEnd(core.ErrStopping)
		return core.ErrStopping
	case !start && !inSlot && !inBacklog:
		err := b.startMissing(key)
		j.TraceEnd(err)
		return err
	}
	if end {
		// Nothing left to watch: the reaper need not wake for it.
		delete(b.lastSeen, key)
	} else {
		b.touch(key, j.QueuedAt())
	}
	j.MarkQueued()
	b.stats.AddPending(1)
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
		bl = &backlogged{key: key, jobs: []*core.Job{j}}
		b.expireAfter(bl, j)
		b.backlog = append(b.backlog, bl)
		if !end {
			b.backlogOf[key] = bl
		}
	}
	return nil
}

// errNoActive refuses requests to a model whose instances are all passive.
var errNoActive = core.Errorf(core.CodeUnavailable, "no active instance to run the request: every instance group is passive")

// enqueue adds j to slot's queue and wakes the slot's worker; b.mu is held.
func (b *seqBatcher) enqueue(slot *seqSlot, j *core.Job) {
	slot.queue = append(slot.queue, j)
	wake(slot.inst)
}

func wake(si *seqInstance) {
	select {
	case si.wake <- struct{}{}:
	default:
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
	var e core.Execution
	var errs []error
	var timer *time.Timer
	for {
		// A sequence cannot move to another instance: its slots wait.
		core.AwaitService(si.inst, b.quit)
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
		core.AcquireFor(si.limit, jobs)
		errs = core.RunExecution(si.inst, b.cfg.model, b.cfg.decoupled, b.stats, jobs, b.log, &e, errs)
		si.limit.Release(false)
		var lost []*core.Job
		b.mu.Lock()
		for i, j := range jobs {
			switch {
			case slotOf(j) == nil: // a not-ready row
			case errs[i] == core.ErrRescheduled:
				if !b.requeue(j) {
					lost = append(lost, j)
				}
			case j.Request().Correlation.Flags&core.FlagSequenceEnd != 0:
				b.release(slotOf(j))
			case b.cfg.iterative:
				b.endIterative(j)
			}
		}
		b.mu.Unlock()
		for i, j := range jobs {
			if slotOf(j) != nil && errs[i] != core.ErrPending && errs[i] != core.ErrRescheduled {
				b.finish(j, errs[i])
			}
		}
		for _, j := range lost {
			b.finish(j, b.startMissing(keyOf(j.Request().Correlation)))
		}
	}
}

// finish answers j; under preserve_ordering a request that ran is
// answered, with the responses it held back, once the requests taken
// before it on its instance are.
func (b *seqBatcher) finish(j *core.Job, err error) {
	if !b.cfg.preserve || !j.Taken() {
		j.End(err)
		return
	}
	slotOf(j).inst.order.Finish(j, err)
}

// Close stops taking work, lets queued requests run and closes the
// instances.
func (b *seqBatcher) Close() {
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
			ratelimit.Slots{si.limit}.Unregister()
		}
		_ = si.inst.Close()
	}
}

// asksFor reports whether the client of j asked for output name: by name,
// or by asking for every output when the configuration lists it (a state
// output listed under `output` reaches the client only then).
func (b *seqBatcher) asksFor(j *core.Job, name string) bool {
	if asked := j.Caller().Outputs; asked != nil {
		return slices.ContainsFunc(asked, func(o core.RequestedOutput) bool { return o.Name == name })
	}
	return b.cfg.listed[name]
}

// slotOf is the slot of j's sequence, once j is at the head of its queue
// (nil before, and for a not-ready row).
func slotOf(j *core.Job) *seqSlot {
	s, _ := j.Owned.(*seqSlot)
	return s
}

// Retire marks b retired once it has no live sequence, or at once with
// force, and reports whether it is: from then on a START reaching it is
// refused with core.ErrRetired and runs on the serving copy, so no
// sequence begins on a copy that is closing. Deciding under b.mu, as
// Submit does, leaves no gap between the two.
func (b *seqBatcher) Retire(force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if force || len(b.active)+len(b.backlogOf) == 0 {
		b.retired = true
	}
	return b.retired
}

// Stop refuses new STARTs from now on, as Triton's
// SequenceBatchScheduler::Stop, and returns the sequences still live.
func (b *seqBatcher) Stop() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopping = true
	return len(b.active) + len(b.backlogOf)
}

// Stopping reports whether Stop was called.
func (b *seqBatcher) Stopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopping
}

// startMissing refuses a request of sequence key, which is not live.
func (b *seqBatcher) startMissing(key corrKey) error {
	return core.Errorf(core.CodeInvalidArg, "inference request for sequence %s to model '%s' must specify the START flag on the first request of the sequence", key, b.cfg.model)
}

// Owns reports whether sequence c is live here.
func (b *seqBatcher) Owns(c core.Correlation) bool {
	key := keyOf(c)
	b.mu.Lock()
	defer b.mu.Unlock()
	_, inSlot := b.active[key]
	_, inBacklog := b.backlogOf[key]
	return inSlot || inBacklog
}

// Forget ends sequence c as the idle reaper would (its requests already
// queued still run): it starts over elsewhere.
func (b *seqBatcher) Forget(c core.Correlation) {
	key := keyOf(c)
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

// Keep takes the state outputs of a sequence's request out of resp (see
// seqSlot.keep).
func (b *seqBatcher) Keep(j *core.Job, resp *core.ExecResponse) error {
	slot := slotOf(j)
	if slot == nil {
		return nil
	}
	return slot.keep(b.cfg, resp, func(name string) bool { return b.asksFor(j, name) })
}

// Preserves reports whether responses wait for their request's turn
// (oldest's preserve_ordering).
func (b *seqBatcher) Preserves() bool { return b.cfg.preserve }

// Settle answers j, a decoupled request that went on sending after its
// execution and has now ended with err.
func (b *seqBatcher) Settle(j *core.Job, err error) {
	b.stats.EndRunning(j)
	b.finish(j, err)
}
