package core

import (
	"time"

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
	j.traceBegin()
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
	j.traceEnd(err)
	j.done <- err
}

// errNoEnsembles fails an ensemble's load on a server made without
// Options.Ensembles.
var errNoEnsembles = Errorf(CodeUnavailable, "ensemble models are not served: the server has no ensemble scheduler (core.Options.Ensembles)")
