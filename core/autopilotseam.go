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
// serves (core/dynamic's, with dynamic_batching): the queue delay and the
// preferred batch sizes, never a request dropped or failed by the change.
type Tuner interface {
	Tune(delay time.Duration, preferred []int64)
	// Tuning is what is in force.
	Tuning() (delay time.Duration, preferred []int64)
	// Pipelined says the instances take their next batch while they run
	// the last (Python workers): then no batch grows from what queues
	// while an instance runs, and only a delay makes batches larger.
	Pipelined() bool
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
	Delay          time.Duration
	Preferred      []int64
	Decisions      []SLODecision
}

// SLODecision is one change the autopilot made, and why.
type SLODecision struct {
	At                   time.Time
	Delay, FromDelay     time.Duration
	Preferred, FromPref  []int64
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
func (mv *ModelVersion) Tuning() (delay time.Duration, preferred []int64, ok bool) {
	t, ok := mv.batch.(Tuner)
	if !ok || mv.slo == nil {
		return 0, nil, false
	}
	delay, preferred = t.Tuning()
	return delay, preferred, true
}
