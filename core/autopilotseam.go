package core

import (
	"context"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// The autopilot (core/autopilot, docs/autopilot.md) tunes the dynamic
// batching of versions that declare a p99 latency target while they
// serve. The core asks it to watch each version it loads on a batch
// scheduler and stops the watch when the version closes; the frontends
// read what it reports through the version.

// Autopilot watches freshly loaded versions.
type Autopilot interface {
	// Watch starts tuning mv, which runs on b, when mv declares a target;
	// nil when it does not (or b cannot be tuned).
	Watch(mv *ModelVersion, b BatchScheduler) SLOWatch
}

// Reloader is what an autopilot that changes the instance count or
// ONNX Runtime's threads needs of the server: Server.Retune.
type Reloader interface {
	Retune(ctx context.Context, mv *ModelVersion, cfg *modelconfig.ModelConfig) error
}

// AutopilotBinder is an Autopilot that reloads versions (core/autopilot's
// Pilot): NewServer hands it the server, and Shutdown closes it first
// (Close waits for its reloads in flight and starts no more), so that no
// reload loads a model after the shutdown took them down.
type AutopilotBinder interface {
	Bind(r Reloader)
	Close()
}

// SLOWatch is the autopilot's hold on one version.
type SLOWatch interface {
	// Stop ends the tuning; the version keeps the batching last set.
	Stop()
	// Report is what the watch measured and decided so far.
	Report() SLOReport
}

// Tuner is a BatchScheduler whose dynamic batching can change while it
// serves (core/dynamic's, with dynamic_batching): the queue delay, the
// preferred batch sizes and a cap on the rows of a batch, never a request
// dropped or failed by the change.
type Tuner interface {
	Tune(b BatchTuning)
	// Tuning is what is in force.
	Tuning() BatchTuning
	// Pipelined says the instances take their next batch while they run
	// the last (Python workers): then no batch grows from what queues
	// while an instance runs, and only a delay makes batches larger.
	Pipelined() bool
}

// BatchTuning is a dynamic batching setting: max_queue_delay, the preferred
// batch sizes, and MaxBatch, the most rows the batcher puts in one batch
// (0: max_batch_size). The cap is inferd's: Triton's batcher sends up to
// max_batch_size once a request has waited the delay, so a saturating load
// forms batches of that size whatever the preferred ones; the autopilot
// caps them where a larger batch would break the target. A request larger
// than the cap still runs, alone; max_batch_size itself, the model's
// contract with its clients, never changes.
type BatchTuning struct {
	Delay     time.Duration
	Preferred []int64
	MaxBatch  int64
}

// Apply writes b's queue delay and preferred sizes into db, a copy of a
// configuration's dynamic_batching: what GET config shows once an
// autopilot has tuned the version, and what its reloads start from. The
// cap has no field there.
func (b BatchTuning) Apply(db *modelconfig.ModelDynamicBatching) {
	db.MaxQueueDelayMicroseconds = uint64(b.Delay.Microseconds())
	db.PreferredBatchSize = db.PreferredBatchSize[:0]
	for _, p := range b.Preferred {
		db.PreferredBatchSize = append(db.PreferredBatchSize, int32(p))
	}
}

// SLOReport is a watched version's target, what was measured in the last
// window, the capacity the autopilot estimates at the settings in force,
// and its latest decisions, newest last.
type SLOReport struct {
	TargetP99 time.Duration
	// MeasuredP99 is the last window's p99 request latency (0: no window
	// with enough requests yet); Requests and RatePerSec are that window's.
	MeasuredP99 time.Duration
	Requests    uint64
	RatePerSec  float64
	// Instances and Threads are the instance count and ONNX Runtime
	// intra-op threads per instance in force where the autopilot tunes
	// them (0: it does not; Threads 0 with Instances set: the backend's
	// own threads).
	Instances, Threads int
	// CapacityPerSec is the inference rate the version could serve within
	// its target at the settings in force (0: not yet estimated), from the
	// execution costs measured per batch size; Headroom is 1 - rate ÷
	// capacity.
	CapacityPerSec float64
	Headroom       float64
	BatchTuning
	Decisions []SLODecision
}

// SLODecision is one change the autopilot made, and why.
type SLODecision struct {
	At                   time.Time
	To, From             BatchTuning
	Reason               string
	MeasuredP99          time.Duration
	RatePerSec, Capacity float64
	// Instances and Threads, and the From values before, are set on a
	// decision that changed the instances (0 on a batching decision).
	Instances, FromInstances, Threads, FromThreads int
}

// SLO is the report of mv's autopilot watch; false when none watches it.
func (mv *ModelVersion) SLO() (SLOReport, bool) {
	if mv.slo == nil {
		return SLOReport{}, false
	}
	return mv.slo.Report(), true
}

// Tuning is the dynamic batching in force when the version's scheduler
// can be tuned (false otherwise): what GET config shows in place of the
// configured values once an autopilot has changed them.
func (mv *ModelVersion) Tuning() (BatchTuning, bool) {
	t, ok := mv.batch.(Tuner)
	if !ok || mv.slo == nil {
		return BatchTuning{}, false
	}
	return t.Tuning(), true
}
