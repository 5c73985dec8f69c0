// Package ensemble is the ensemble scheduler (triton-inference-server/core
// src/ensemble_scheduler): an ensemble's InferRequest runs its ensemble
// steps as a data-flow graph, each step an InferRequest of its own on its
// composing model, and the ensemble's InferResponses are assembled from
// the steps' outputs. It also checks an ensemble against its composing
// models when the core loads it. It reaches the core through its
// vocabulary and the Scheduler seam only (core.Job, core.EnsembleHost;
// terms as in the glossary of docs/architecture.md); core.Options.Ensembles
// takes its Scheduling.
package ensemble

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// ensemble is the ensemble scheduler (triton-inference-server/core
// src/ensemble_scheduler/ensemble_scheduler.cc): each
// request runs the steps as a data-flow graph, a step firing as soon as
// the ensemble tensors it consumes exist, independent steps concurrently.
// A step is an ordinary request to its composing model, which keeps its
// own scheduler, batching and statistics; tensors pass between steps
// without copies.
type ensemble struct {
	host  core.EnsembleHost
	name  string
	steps []*step
	// labels gives each ensemble tensor its decoupled origin: 0, or 1 +
	// the index of the decoupled step it descends from. outLabel is the
	// outputs' (0: the ensemble answers once).
	labels   map[string]int
	outLabel int
	// sequenced: some step's model takes part in sequences (Sequenced);
	// firstSeq counts those steps that run on iteration 0, which a
	// request's Submit waits to see queued (see Submit).
	sequenced bool
	firstSeq  int

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // requests in flight
}

type step struct {
	model   string
	key     string // the model's registry key (repo.Key of its namespace and name)
	version int64  // LatestVersion for -1
	// inputs maps each composing-model input to the ensemble tensor it
	// reads; outputs maps each composing-model output it keeps to the
	// ensemble tensor it writes.
	inputs     map[string]string
	inputNames []string // the keys of inputs, sorted: a fixed order
	outputs    map[string]string
	requested  []core.RequestedOutput
	// slots bounds the step's in-flight requests across every ensemble
	// request (max_inflight_requests); nil when unbounded.
	slots chan struct{}
	// label is the decoupled origin of the step's inputs, labeled one of
	// the inputs carrying it; decoupled says the composing model streams.
	label     int
	labeled   string
	decoupled bool
	sequenced bool // the composing model takes part in sequences
}

// Scheduling is the ensemble scheduler as the core's lifecycle uses it
// (core.Options.Ensembles).
type Scheduling struct{}

// New builds the scheduler of an ensemble whose composing models the core
// has loaded and Check has checked.
func (Scheduling) New(host core.EnsembleHost, cfg *modelconfig.ModelConfig) core.Scheduler {
	return newEnsemble(host, cfg)
}

// Check checks ensemble cfg against its composing models' configurations
// (see check).
func (Scheduling) Check(cfg *modelconfig.ModelConfig, configs map[string]*modelconfig.ModelConfig) error {
	return check(cfg, configs)
}

func newEnsemble(host core.EnsembleHost, cfg *modelconfig.ModelConfig) *ensemble {
	e := &ensemble{host: host, name: cfg.GetName()}
	labels, _ := labelsOf(cfg, host.Decoupled)
	limit := cfg.GetEnsembleScheduling().GetMaxInflightRequests()
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		s := &step{model: st.GetModelName(), key: repo.Key(st.GetModelNamespace(), st.GetModelName()), version: st.GetModelVersion(), inputs: st.GetInputMap(), outputs: st.GetOutputMap()}
		if s.version < 0 {
			s.version = core.LatestVersion
		}
		s.inputNames = slices.Sorted(maps.Keys(s.inputs))
		for _, name := range slices.Sorted(maps.Keys(s.outputs)) {
			s.requested = append(s.requested, core.RequestedOutput{Name: name})
		}
		if limit > 0 {
			s.slots = make(chan struct{}, limit)
		}
		s.decoupled = host.Decoupled(s.key)
		s.sequenced = host.Sequenced(s.key)
		for _, from := range slices.Sorted(maps.Values(s.inputs)) {
			if l := labels.tensors[from]; l != 0 {
				s.label, s.labeled = l, from
			}
		}
		e.steps = append(e.steps, s)
	}
	e.labels = labels.tensors
	for _, st := range e.steps {
		if st.sequenced {
			e.sequenced = true
			if st.label == 0 {
				e.firstSeq++
			}
		}
	}
	for _, out := range cfg.GetOutput() {
		e.outLabel = max(e.outLabel, labels.tensors[out.GetName()])
	}
	return e
}

// stepsQueued tells an ensemble request's Submit when the requests of
// its sequenced steps (those that run on iteration 0) are queued in their
// models, or the request has ended: its next request in the sequence may
// then follow without overtaking it at a stateful step. Triton's ensemble
// scheduler enqueues a request's first steps within its Enqueue
// (triton-inference-server/core src/ensemble_scheduler/ensemble_scheduler.cc).
type stepsQueued struct {
	mu   sync.Mutex
	left int
	done chan struct{}
}

// step marks one sequenced step's request queued (or refused).
func (q *stepsQueued) step() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left > 0 {
		q.left--
		if q.left == 0 {
			close(q.done)
		}
	}
}

// end marks the request ended.
func (q *stepsQueued) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left > 0 {
		q.left = 0
		close(q.done)
	}
}

// Submit starts j's graph on a goroutine of its own.
func (e *ensemble) Submit(j *core.Job) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return core.Errorf(core.CodeUnavailable, "model is unloading")
	}
	if err := j.Request().Context().Err(); err != nil {
		e.mu.Unlock()
		return core.Errorf(core.CodeCancelled, "request cancelled before it was queued")
	}
	e.wg.Add(1)
	e.mu.Unlock()
	j.Begin()
	var q *stepsQueued
	if e.firstSeq > 0 && j.Caller().Queued != nil {
		q = &stepsQueued{left: e.firstSeq, done: make(chan struct{})}
	}
	go e.run(j, q)
	if q != nil {
		// The caller's Queued runs once Submit returns.
		<-q.done
	}
	return nil
}

// run executes one ensemble request and answers it.
func (e *ensemble) run(j *core.Job, q *stepsQueued) {
	defer e.wg.Done()
	err := e.execute(j, q)
	if q != nil {
		q.end()
	}
	j.Complete(err)
}

// Sequenced reports whether some step's model takes part in sequences
// (core.ModelVersion.Sequenced).
func (e *ensemble) Sequenced() bool { return e.sequenced }

// Close stops taking requests and waits for those running.
func (e *ensemble) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.wg.Wait()
}

// responseCorrelation is the correlation a step's response parameters
// give its outputs: sequence_id (an integer or a string) replaces the id of
// corr, the step's own, and sequence_start and sequence_end, when true, are
// the only flags; nil when the response names none of them
// (triton-inference-server/core src/ensemble_scheduler/ensemble_scheduler.cc,
// ConsumeResponse).
func responseCorrelation(corr core.Correlation, params map[string]any) (*core.Correlation, error) {
	set := false
	out := core.Correlation{ID: corr.ID, StringID: corr.StringID, IsString: corr.IsString}
	if v, ok := params["sequence_id"]; ok {
		set = true
		switch v := v.(type) {
		case int64:
			out = core.Correlation{ID: uint64(v), StringID: strconv.FormatUint(uint64(v), 10)}
		case uint64:
			out = core.Correlation{ID: v, StringID: strconv.FormatUint(v, 10)}
		case string:
			out = core.Correlation{StringID: v, IsString: true}
		default:
			return nil, core.Errorf(core.CodeInvalidArg, "expected parameter 'sequence_id' to be TRITONSERVER_PARAMETER_INT or TRITONSERVER_PARAMETER_STRING")
		}
	}
	for _, f := range []struct {
		name string
		flag uint32
	}{{"sequence_start", core.FlagSequenceStart}, {"sequence_end", core.FlagSequenceEnd}} {
		v, ok := params[f.name]
		if !ok {
			continue
		}
		set = true
		b, isBool := v.(bool)
		if !isBool {
			return nil, core.Errorf(core.CodeInvalidArg, "expect parameter '%s' to be TRITONSERVER_PARAMETER_BOOL", f.name)
		}
		if b {
			out.Flags |= f.flag
		}
	}
	if !set {
		return nil, nil
	}
	return &out, nil
}
