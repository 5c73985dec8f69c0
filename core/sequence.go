package core

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
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
	j.seqb = b
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

// addControls appends the control tensors of r's sequence flags and
// correlation id, in control_input order (READY is always true: every
// request an execution holds is a ready one), and asks for the state
// outputs besides the requested ones.
func (sc *seqConfig) addControls(r *ExecRequest) {
	shape := []int64{1}
	if sc.batching {
		shape = []int64{1, 1}
	}
	for _, c := range sc.controls {
		t := &Tensor{Name: c.name, DataType: c.dt, Shape: shape}
		switch c.kind {
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_START:
			t.Data = pick(c, r.Correlation.Flags&FlagSequenceStart != 0)
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_END:
			t.Data = pick(c, r.Correlation.Flags&FlagSequenceEnd != 0)
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_READY:
			t.Data = c.on
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID:
			t.Data = corridData(c.dt, r.Correlation)
		}
		r.Inputs = append(r.Inputs, t)
	}
	if len(sc.stateOuts) > 0 {
		r.Outputs = unionSorted(r.Outputs, sc.stateOuts)
	}
	r.batch = ConcatBatch{Inputs: r.Inputs, Outputs: r.Outputs}
}

func pick(c seqControl, on bool) []byte {
	if on {
		return c.on
	}
	return c.off
}

// corridData encodes a correlation id as CORRID's data type; numeric types
// narrower than 64 bits take the id's low bits, as Triton's cast does.
func corridData(dt DataType, c Correlation) []byte {
	switch dt {
	case TypeBytes:
		return AppendBytesElement(nil, []byte(c.StringID))
	case TypeUint32, TypeInt32:
		return binary.LittleEndian.AppendUint32(nil, uint32(c.ID))
	}
	return binary.LittleEndian.AppendUint64(nil, c.ID)
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

type droppedJob struct {
	j   *Job
	err error
}

// form takes the next execution of si off its slots, or says how long to
// wait (0: for a wake-up) and whether the worker is done. It drops the
// requests whose client went away and releases the slots of sequences the
// reaper ended once their queues are empty.
func (b *seqBatcher) form(si *seqInstance, now time.Time) (jobs []*Job, dropped []droppedJob, wait time.Duration, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var heads []*Job
	var earliest time.Time
	for _, slot := range si.slots {
		for len(slot.queue) > 0 {
			j := slot.queue[0]
			if j.ctx.Err() != nil {
				// Its client went away: it does not run. An END taken out
				// this way still ends the sequence.
				slot.queue = slot.queue[1:]
				b.stats.addPending(-1)
				dropped = append(dropped, droppedJob{j, &cancelled{context.Cause(j.ctx)}})
				switch {
				case j.req.Correlation.Flags&FlagSequenceEnd != 0:
					b.release(slot)
				case b.cfg.iterative:
					b.endIterative(j)
				}
				continue
			}
			break
		}
		if len(slot.queue) == 0 {
			if slot.reaped {
				b.release(slot)
			}
			if len(slot.queue) == 0 {
				continue
			}
		}
		j := slot.queue[0]
		j.seq = slot
		heads = append(heads, j)
		if earliest.IsZero() || j.times.queue.Before(earliest) {
			earliest = j.times.queue
		}
	}
	if len(heads) == 0 {
		return nil, dropped, 0, b.closed
	}
	limit := int(max(1, b.cfg.maxBS))
	waited := now.Sub(earliest)
	if b.cfg.oldest {
		// Oldest first, as a dynamic batcher over the candidates' heads.
		slices.SortStableFunc(heads, func(x, y *Job) int { return x.times.queue.Compare(y.times.queue) })
	} else if b.cfg.delay > 0 && b.cfg.minUtil > 0 && waited <= b.cfg.delay &&
		float64(len(heads))/float64(limit) < b.cfg.minUtil {
		return nil, dropped, b.cfg.delay - waited + time.Microsecond, false
	}
	states := make([][]*Tensor, 0, len(heads))
	var batch []*Job
	for _, j := range heads {
		if len(batch) == limit {
			break
		}
		st := b.stateInputs(j)
		if len(batch) > 0 && !b.compatible(batch[0], states[0], j, st) {
			continue
		}
		batch = append(batch, j)
		states = append(states, st)
	}
	if b.cfg.oldest && b.cfg.delay > 0 && len(batch) < limit && waited < b.cfg.delay {
		// As the dynamic batcher: run at the largest preferred size
		// reached, else wait for more until the delay is up.
		k := len(batch)
		for k > 0 && !slices.Contains(b.cfg.pref, int64(k)) {
			k--
		}
		if k == 0 {
			return nil, dropped, b.cfg.delay - waited + time.Microsecond, false
		}
		batch, states = batch[:k], states[:k]
	}
	for i, j := range batch {
		slot := j.seq
		slot.queue[0] = nil
		slot.queue = slot.queue[1:]
		if len(slot.queue) == 0 {
			slot.queue = slot.queue[:0:0]
		}
		j.req.Inputs = append(j.req.Inputs, states[i]...)
		j.req.batch.Inputs = j.req.Inputs
		j.state = jobTaken
		j.times.exec = now
	}
	if b.cfg.preserve {
		si.order.taken(batch...)
	}
	b.stats.addPending(-int64(len(batch)))
	if !b.cfg.oldest && b.cfg.batching {
		return b.pad(batch, heads[len(heads)-1].seq.idx), dropped, 0, false
	}
	return batch, dropped, 0, false
}

// pad spreads batch, a direct execution's requests in slot order, over
// the slots 0 to top (the highest slot with a request ready), a not-ready
// request in each slot without one of batch's, as Triton's
// DirectSequenceBatch does (triton-inference-server/core
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc), so a
// sequence's row is its slot's. The not-ready requests have no slot
// (job.seq nil): their responses go nowhere and their states are not kept.
func (b *seqBatcher) pad(batch []*Job, top int) []*Job {
	if len(batch) == top+1 {
		return batch
	}
	out := make([]*Job, top+1)
	for _, j := range batch {
		out[j.seq.idx] = j
	}
	for k, j := range out {
		if j == nil {
			out[k] = b.notReady(batch[0])
		}
	}
	return out
}

// notReady is Triton's null request, a copy of rep for a slot with no
// request ready: zeroed inputs and states of rep's shapes (Triton leaves
// them unset; the model must not read them), START, END and READY false,
// CORRID 0 ("the model can't assume that any other inputs are meaningful,
// including CORRID").
func (b *seqBatcher) notReady(rep *Job) *Job {
	// seqb set: a decoupled model's sends after the execution reach it as
	// a real request's do.
	n := &Job{ctx: context.Background(), done: make(chan error, 1), mv: rep.mv, orig: &InferRequest{}, emit: discard, size: rep.size, seqb: b}
	ins := rep.req.Inputs
	first := len(ins) - len(b.cfg.states) - len(b.cfg.controls) // the first control's index
	out := make([]*Tensor, len(ins))
	for i, t := range ins {
		z := &Tensor{Name: t.Name, DataType: t.DataType, Shape: slices.Clone(t.Shape), Data: zeroData(t.DataType, ElementCount(t.Shape))}
		if k := i - first; k >= 0 && k < len(b.cfg.controls) &&
			b.cfg.controls[k].kind != modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID {
			z.Data = b.cfg.controls[k].off
		}
		out[i] = z
	}
	n.req = ExecRequest{Inputs: out, Outputs: rep.req.Outputs, BatchSize: rep.req.BatchSize, job: n,
		batch: ConcatBatch{Inputs: out, Outputs: rep.req.Outputs}}
	return n
}

// stateInputs are the state tensors j runs with: its sequence's current
// state, or the initial state when j starts the sequence (which also
// resets the slot's state, so nothing leaks from an earlier sequence).
func (b *seqBatcher) stateInputs(j *Job) []*Tensor {
	if len(b.cfg.states) == 0 {
		return nil
	}
	slot := j.seq
	slot.smu.Lock()
	defer slot.smu.Unlock()
	if j.req.Correlation.Flags&FlagSequenceStart != 0 || slot.state == nil {
		slot.state = b.cfg.initialStates()
	}
	out := make([]*Tensor, len(slot.state))
	for i, t := range slot.state {
		out[i] = &Tensor{Name: b.cfg.states[i].in, DataType: t.DataType, Shape: t.Shape, Data: t.Data}
	}
	return out
}

// initialStates are a fresh sequence's states: initial_state, or zeros
// with each variable dimension 1 (as Triton's SequenceStates::Initialize).
func (sc *seqConfig) initialStates() []*Tensor {
	out := make([]*Tensor, len(sc.states))
	for i, s := range sc.states {
		if s.init != nil {
			out[i] = s.init
			continue
		}
		var shape []int64
		if sc.batching {
			shape = append(shape, 1)
		}
		for _, d := range s.dims {
			if d == -1 {
				d = 1
			}
			shape = append(shape, d)
		}
		out[i] = &Tensor{Name: s.in, DataType: s.dt, Shape: shape, Data: zeroData(s.dt, ElementCount(shape))}
	}
	return out
}

// compatible reports whether j (with states st) may join a batch started
// by first (with states fst): the same inputs, and the same shapes but for
// the batch dimension and ragged inputs, so that they concatenate.
func (b *seqBatcher) compatible(first *Job, fst []*Tensor, j *Job, st []*Tensor) bool {
	if !b.cfg.batching {
		return false
	}
	same := func(x, y []*Tensor) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name {
				return false
			}
			if !b.cfg.ragged[x[i].Name] && !slices.Equal(x[i].Shape[1:], y[i].Shape[1:]) {
				return false
			}
		}
		return true
	}
	return same(first.req.Inputs, j.req.Inputs) && same(fst, st)
}

// keep takes the state outputs out of resp and keeps them as the slot's
// next state; a model that is not decoupled must produce every state
// output in its response.
func (s *seqSlot) keep(sc *seqConfig, resp *ExecResponse, asked func(string) bool) error {
	if len(sc.states) == 0 || resp == nil || resp.Err != nil {
		return nil
	}
	found := make([]*Tensor, len(sc.states))
	outs := make([]*Tensor, 0, len(resp.Outputs))
	for _, t := range resp.Outputs {
		k := slices.IndexFunc(sc.states, func(st seqState) bool { return st.out == t.Name })
		if k < 0 {
			outs = append(outs, t)
			continue
		}
		found[k] = &Tensor{Name: sc.states[k].in, DataType: t.DataType, Shape: slices.Clone(t.Shape), Data: bytes.Clone(t.Data)}
		if asked(t.Name) {
			// "For debugging purposes, the client can request the output
			// state" (triton-inference-server/server
			// docs/user_guide/implicit_state_management.md).
			outs = append(outs, t)
		}
	}
	resp.Outputs = outs
	s.smu.Lock()
	defer s.smu.Unlock()
	for k, t := range found {
		if t == nil {
			if sc.decoupled {
				continue
			}
			return Errorf(CodeInternal, "model '%s' did not produce the output '%s' of state '%s'", sc.model, sc.states[k].out, sc.states[k].in)
		}
		if s.state != nil {
			s.state[k] = t
		}
	}
	return nil
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

// warmup completes a model_warmup request of a sequence model, which runs
// outside the sequence batcher: a one-request sequence (START and END, id 1)
// with the initial state.
func (sc *seqConfig) warmup(r *ExecRequest) {
	r.Correlation = Correlation{ID: 1, StringID: "1", Flags: FlagSequenceStart | FlagSequenceEnd}
	if sc.corrid >= 0 && sc.controls[sc.corrid].dt == TypeBytes {
		r.Correlation.IsString = true
	}
	sc.addControls(r)
	r.Inputs = append(r.Inputs, sc.initialStates()...)
	r.batch.Inputs = r.Inputs
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

// errRescheduled is end's report for a request its model rescheduled.
var errRescheduled = errors.New("request rescheduled")

// Reschedule asks for r to run again in a later execution rather than end
// with this one: Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
// (pb_utils' request.set_release_flags), for a model with
// iterative_sequence only. The request keeps its sequence, slot and
// state; it comes back without START. A decoupled model may go on sending
// its non-final responses.
func (r *ExecRequest) Reschedule() error {
	j := r.job
	if j == nil || j.seq == nil || !j.seqb.cfg.iterative {
		return Errorf(CodeInvalidArg, "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final {
		return errFinished
	}
	r.rescheduled = true
	return nil
}

// requeue puts j, which its model rescheduled, back in its slot's queue
// with its controls for a request without START, as Triton's
// IterativeSequencer::RescheduleRequest enqueues it again with flags 0; the
// state inputs are added again when it is taken. It reports false when j's
// sequence ended meanwhile (idle timeout); b.mu is held.
func (b *seqBatcher) requeue(j *Job) bool {
	key := keyOf(j.req.Correlation)
	if b.active[key] != j.seq {
		return false
	}
	r := &j.req
	r.mu.Lock()
	r.rescheduled = false
	n := len(r.Inputs) - len(b.cfg.states) - len(b.cfg.controls) // the request's own inputs
	r.Inputs = r.Inputs[:n:n]
	r.Correlation.Flags = 0
	b.cfg.addControls(r)
	r.mu.Unlock()
	j.state = jobQueued
	b.stats.addPending(1)
	b.touch(key, time.Now())
	b.enqueue(j.seq, j)
	return true
}

// endIterative ends the sequence of j, an iterative request released for
// good, as Triton's IterativeSequencer does with a cancelled END: its slot
// is freed once the requests queued there have run; b.mu is held.
func (b *seqBatcher) endIterative(j *Job) {
	key := keyOf(j.req.Correlation)
	slot := j.seq
	if b.active[key] != slot {
		return // already ended (idle timeout)
	}
	delete(b.active, key)
	delete(b.lastSeen, key)
	if len(slot.queue) == 0 {
		b.release(slot)
		return
	}
	slot.reaped = true
	wake(slot.inst)
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
