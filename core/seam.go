package core

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/inferd/inferd/core/ratelimit"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Scheduler queues a version's requests and runs them: the scheduler of a
// core subpackage (core/ensemble's), which reaches the core through this
// seam only. The default scheduler, dynamic batcher and sequence batcher
// are still core's own (the unexported executor and runner); they are to
// move behind this seam too.
type Scheduler interface {
	// Submit queues j or refuses it synchronously; j ends once its
	// scheduler calls one of its ending methods (Complete).
	Submit(j *Job) error
	// Close stops taking work and waits for the work taken.
	Close()
}

// executor runs one model version's requests: the Scheduler the
// lifecycle made for it (external).
type executor interface {
	// submit queues j or refuses it synchronously; the job's done channel
	// reports its end.
	submit(j *Job) error
	// close stops taking work and waits for the work taken.
	close()
}

// Ensembles is the ensemble scheduler's side of the lifecycle: the core
// loads an ensemble's composing models, then has it checked against their
// configurations and makes its scheduler (core/ensemble's Scheduling).
type Ensembles interface {
	// Check checks ensemble cfg against its composing models'
	// configurations (by step model name) and sets cfg's decoupled flag
	// from theirs.
	Check(cfg *modelconfig.ModelConfig, configs map[string]*modelconfig.ModelConfig) error
	// New makes the scheduler of one loaded ensemble version.
	New(host EnsembleHost, cfg *modelconfig.ModelConfig) Scheduler
}

// EnsembleHost is what an ensemble's scheduler asks the server: its
// composing models, by registry key (the step's model_namespace and name,
// repo.Key).
type EnsembleHost interface {
	// Decoupled reports whether the serving model of key is decoupled.
	Decoupled(key string) bool
	// Sequenced reports whether the serving model of key takes part in
	// sequences (ModelVersion.Sequenced).
	Sequenced(key string) bool
	// Acquire holds version (LatestVersion: the highest ready) of the
	// model of key until release is called.
	Acquire(key string, version int64) (mv *ModelVersion, release func(), err error)
}

// ensembleHost is the Server as an EnsembleHost.
type ensembleHost struct{ s *Server }

func (h ensembleHost) Decoupled(key string) bool {
	c := h.s.servingConfig(key)
	return c != nil && c.GetModelTransactionPolicy().GetDecoupled()
}

func (h ensembleHost) Sequenced(key string) bool { return h.s.sequenced(key, 0) }

func (h ensembleHost) Acquire(key string, version int64) (*ModelVersion, func(), error) {
	return h.s.acquireKey(key, version)
}

// external runs a Scheduler of a subpackage as a version's executor.
type external struct{ s Scheduler }

func (x external) submit(j *Job) error { return x.s.Submit(j) }
func (x external) close()              { x.s.Close() }

// Request is j's request as its backend, or its scheduler, sees it.
func (j *Job) Request() *ExecRequest { return &j.req }

// Caller is j's request as its caller handed it to the core (its trace,
// its Queued hook).
func (j *Job) Caller() *InferRequest { return j.orig }

// Begin marks j running now, for a scheduler that runs it itself rather
// than on an instance (statistics, trace).
func (j *Job) Begin() {
	j.times.exec = time.Now()
	j.times.cin = j.times.exec
	j.TraceBegin()
}

// Complete ends j, which its scheduler ran itself since Begin (an
// ensemble runs its steps as requests of their own): err fails it, counted
// as OTHER whatever failed and why, as Triton counts a failed ensemble
// request (triton-inference-server/core
// src/ensemble_scheduler/ensemble_scheduler.cc, FinishEnsemble); on
// success it counts as one execution of its batch size whose compute time
// is the run's wall time (Triton sums its steps' compute times).
func (j *Job) Complete(err error) {
	j.times.cout = time.Now()
	j.times.execEnd = j.times.cout
	r := &j.req
	if err != nil {
		_ = r.Send(&ExecResponse{Err: responseError{err}}, true)
	} else {
		j.mv.Stats.recordExecution(max(1, r.BatchSize), 0, j.times.cout.Sub(j.times.cin).Nanoseconds(), 0)
	}
	err = r.end(nil, j.mv.Name, false)
	j.TraceEnd(err)
	j.done <- err
}

// errNoSequences fails a sequence_batching model's load on a server made
// without Options.Sequences.
var errNoSequences = Errorf(CodeUnavailable, "sequence batching models are not served: the server has no sequence batcher (core.Options.Sequences)")

// errNoEnsembles fails an ensemble's load on a server made without
// Options.Ensembles.
var errNoEnsembles = Errorf(CodeUnavailable, "ensemble models are not served: the server has no ensemble scheduler (core.Options.Ensembles)")

// Sequences is the sequence batcher's side of the lifecycle
// (core/sequence's Batchers): the core reads a sequence_batching model's
// configuration through it at load, before its instances are made, and
// has it make the version's scheduler once they are.
type Sequences interface {
	// Configure reads cfg's sequence_batching, refusing what Triton
	// refuses, and the initial state files under modelDir.
	Configure(cfg *modelconfig.ModelConfig, modelDir string) (SequenceConfig, error)
}

// SequenceConfig is one version's read sequence_batching.
type SequenceConfig interface {
	// Warmup gives a warmup sample's request the controls of a
	// one-request sequence (START and END), as Triton's warmup does.
	Warmup(r *ExecRequest)
	// New makes the version's sequence scheduler over its active instances.
	New(insts []Instance, limits ratelimit.Slots, stats *Stats, log *slog.Logger) SequenceScheduler
}

// SequenceScheduler is a sequence batcher: a Scheduler that binds each
// sequence to a slot, and that the core asks about its sequences when the
// server exits or a reload replaces the version (handover.go).
type SequenceScheduler interface {
	Scheduler
	// Stop refuses new STARTs from now on (the live sequences go on) and
	// returns how many sequences are live.
	Stop() int
	// Stopping reports whether Stop was called.
	Stopping() bool
	// Owns reports whether the sequence of c is live here.
	Owns(c Correlation) bool
	// Forget ends the sequence of c here: it starts over elsewhere.
	Forget(c Correlation)
	// Retire marks the scheduler retired once no sequence is live, or at
	// once with force, and reports whether it is: a START reaching it then
	// is refused with ErrRetired, and runs on the serving copy instead.
	Retire(force bool) bool
}

// ErrRetired is a retired sequence scheduler's answer to a START (Retire):
// the core runs the request on the copy serving the version now.
var ErrRetired = errors.New("a reload retired this copy of the model")

// What follows is a Job as the scheduler of a subpackage (core/sequence's)
// queues and runs it on instances through RunExecution.

// Context is j's: done when its client goes away.
func (j *Job) Context() context.Context { return j.ctx }

// QueuedAt is when j reached its scheduler.
func (j *Job) QueuedAt() time.Time { return j.times.queue }

// Accept makes r j's Runner (what its request asks about its responses)
// and sizes j by its batch size, once r has checked the request.
func (j *Job) Accept(r Runner) {
	j.runner = r
	j.size = max(1, int64(j.req.BatchSize))
}

// MarkQueued records j waiting in its scheduler's queue (again, after a
// reschedule).
func (j *Job) MarkQueued() { j.state = jobQueued }

// MarkTaken records j taken off the queue, at now, for an execution.
func (j *Job) MarkTaken(now time.Time) {
	j.state = jobTaken
	j.times.exec = now
}

// Taken reports whether j was taken for an execution.
func (j *Job) Taken() bool { return j.state == jobTaken }

// End reports j's end (nil: success) to its caller, ending its trace.
func (j *Job) End(err error) {
	j.TraceEnd(err)
	j.done <- err
}

// Filler is a job of nobody's that stands in an execution for a slot with
// no request ready (the sequence batcher's null request): inputs, j's
// outputs and batch size, run by j's Runner; its responses go nowhere.
func (j *Job) Filler(inputs []*Tensor) *Job {
	n := &Job{ctx: context.Background(), done: make(chan error, 1), mv: j.mv, orig: &InferRequest{}, emit: discard, size: j.size, runner: j.runner}
	n.req = ExecRequest{Inputs: inputs, Outputs: j.req.Outputs, BatchSize: j.req.BatchSize, job: n,
		batch: ConcatBatch{Inputs: inputs, Outputs: j.req.Outputs}}
	return n
}

// SetInputs replaces r's inputs: its scheduler appends its own (a
// sequence's state).
func (r *ExecRequest) SetInputs(inputs []*Tensor) {
	r.Inputs = inputs
	r.batch.Inputs = inputs
}

// Reset replaces r's inputs and outputs as its scheduler changed them (a
// sequence's controls and state outputs); the destinations its caller gave
// the outputs (Into) no longer apply.
func (r *ExecRequest) Reset(inputs []*Tensor, outputs []string) {
	r.Inputs, r.Outputs = inputs, outputs
	r.batch = ConcatBatch{Inputs: inputs, Outputs: outputs}
}

// Cancelled is the end of a queued job whose client went away (ctx, the
// job's, is done).
func Cancelled(ctx context.Context) error { return &cancelled{context.Cause(ctx)} }

// ErrStopping refuses new work while the server exits (Server.Stop).
var ErrStopping = Errorf(CodeUnavailable, "%s", errStopping)

// Sequences is mv's sequence scheduler, nil when mv is not sequence
// batched.
func (mv *ModelVersion) Sequences() SequenceScheduler { return mv.seqs }

// Batching makes the default scheduler or dynamic batcher of each version
// that neither sequence batches nor is an ensemble (core/dynamic's
// Batchers).
type Batching interface {
	// New makes the scheduler of one version over its active instances.
	New(cfg *modelconfig.ModelConfig, insts []Instance, limits ratelimit.Slots, stats *Stats, log *slog.Logger) BatchScheduler
}

// BatchScheduler is a version's default scheduler or dynamic batcher: a
// Scheduler that is the Runner of its jobs, and that the core asks for
// load figures and, for a cached response, its order.
type BatchScheduler interface {
	Scheduler
	Runner
	// Load is how many active instances it feeds and how many of them
	// run an execution now.
	Load() (instances, busy int)
	// Order is its preserve_ordering queue, nil when responses need not
	// wait for earlier requests.
	Order() *TakenOrder
}

// errNoBatching fails a model's load on a server made without
// Options.Batching.
var errNoBatching = Errorf(CodeUnavailable, "models are not served: the server has no batching scheduler (core.Options.Batching)")

// QueueState is what a queueing scheduler (core/dynamic's) keeps of a job
// while it waits; the core never reads it. It lives in the Job so that
// queueing a request allocates nothing more.
type QueueState struct {
	Level    int         // the priority level's index in the scheduler's levels
	Deadline time.Time   // zero: no queue timeout
	Delayed  bool        // timed out under DELAY: served after the level's others
	Stop     func() bool // detaches the cancellation hook
	Timer    *time.Timer // REJECT timeout
}

// Size is what j adds to a batch: max(1, its batch size), once accepted.
func (j *Job) Size() int64 { return j.size }

// Waiting reports whether j waits in its scheduler's queue.
func (j *Job) Waiting() bool { return j.state == jobQueued }

// MarkRemoved records j taken out of the queue unrun (cancelled or
// expired); its end is reported by End.
func (j *Job) MarkRemoved() { j.state = jobRemoved }

// AwaitService waits while inst is out of service (Standby), or until quit
// is closed (its scheduler closes).
func AwaitService(inst Instance, quit <-chan struct{}) {
	sb, ok := inst.(Standby)
	if !ok {
		return
	}
	for ch := sb.Standby(); ch != nil; ch = sb.Standby() {
		select {
		case <-ch:
		case <-quit:
			return
		}
	}
}

// AcquireFor waits for slot's rate limiter resources (nil: rate limiting
// off) before jobs run on its instance: the wait counts as their queue
// time, as Triton's requests leave the queue when their execution starts.
func AcquireFor(slot *ratelimit.Slot, jobs []*Job) {
	if at := slot.Acquire(); !at.IsZero() {
		for _, j := range jobs {
			j.MarkTaken(at)
		}
	}
}
