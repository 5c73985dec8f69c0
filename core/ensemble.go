package core

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

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
	srv   *Server
	stats *Stats
	name  string
	steps []*ensembleStep
	// labels gives each ensemble tensor its decoupled origin: 0, or 1 +
	// the index of the decoupled step it descends from. outLabel is the
	// outputs' (0: the ensemble answers once).
	labels   map[string]int
	outLabel int
	// sequenced: some step's model takes part in sequences (Sequenced);
	// firstSeq counts those steps that run on iteration 0, which a
	// request's submit waits to see queued (see submit).
	sequenced bool
	firstSeq  int

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // requests in flight
}

type ensembleStep struct {
	model   string
	key     string // the model's registry key (stepKey)
	version int64  // LatestVersion for -1
	// inputs maps each composing-model input to the ensemble tensor it
	// reads; outputs maps each composing-model output it keeps to the
	// ensemble tensor it writes.
	inputs     map[string]string
	inputNames []string // the keys of inputs, sorted: a fixed order
	outputs    map[string]string
	requested  []RequestedOutput
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

// newEnsemble builds the scheduler of an ensemble whose composing models
// are loaded and checked (loadComposing).
func newEnsemble(srv *Server, cfg *modelconfig.ModelConfig, stats *Stats) *ensemble {
	e := &ensemble{srv: srv, stats: stats, name: cfg.GetName()}
	decoupled := func(model string) bool {
		c := srv.servingConfig(model)
		return c != nil && c.GetModelTransactionPolicy().GetDecoupled()
	}
	labels, _ := ensembleLabels(cfg, decoupled)
	limit := cfg.GetEnsembleScheduling().GetMaxInflightRequests()
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		step := &ensembleStep{model: st.GetModelName(), key: stepKey(st.GetModelNamespace(), st.GetModelName()), version: st.GetModelVersion(), inputs: st.GetInputMap(), outputs: st.GetOutputMap()}
		if step.version < 0 {
			step.version = LatestVersion
		}
		step.inputNames = slices.Sorted(maps.Keys(step.inputs))
		for _, name := range slices.Sorted(maps.Keys(step.outputs)) {
			step.requested = append(step.requested, RequestedOutput{Name: name})
		}
		if limit > 0 {
			step.slots = make(chan struct{}, limit)
		}
		step.decoupled = decoupled(step.key)
		step.sequenced = srv.sequenced(step.key, 0)
		for _, from := range slices.Sorted(maps.Values(step.inputs)) {
			if l := labels.tensors[from]; l != 0 {
				step.label, step.labeled = l, from
			}
		}
		e.steps = append(e.steps, step)
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

// ensembleLabeling is the decoupled origin of every ensemble tensor.
type ensembleLabeling struct {
	tensors   map[string]int
	decoupled bool // some step's model is decoupled: the ensemble is
}

// ensembleLabels follows the data flow from the ensemble's inputs: a
// decoupled step's outputs get a new label, another step's outputs the
// label of its inputs. A step may not read tensors of two decoupled
// origins, nor may the outputs (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc).
func ensembleLabels(cfg *modelconfig.ModelConfig, decoupled func(model string) bool) (ensembleLabeling, error) {
	name := cfg.GetName()
	l := ensembleLabeling{tensors: map[string]int{}}
	for _, in := range cfg.GetInput() {
		l.tensors[in.GetName()] = 0
	}
	steps := cfg.GetEnsembleScheduling().GetStep()
	done := make([]bool, len(steps))
	for progress := true; progress; {
		progress = false
		for i, st := range steps {
			if done[i] {
				continue
			}
			label, ready := 0, true
			for _, from := range slices.Sorted(maps.Values(st.GetInputMap())) {
				t, ok := l.tensors[from]
				if !ok {
					ready = false
					break
				}
				if t != 0 && label != 0 && t != label {
					return l, Errorf(CodeInvalidArg, "in ensemble %s, step of model '%s' receives inputs originated from different decoupled models", name, st.GetModelName())
				}
				label = max(label, t)
			}
			if !ready {
				continue
			}
			if decoupled(st.GetModelName()) {
				label = i + 1
				l.decoupled = true
			}
			for _, to := range st.GetOutputMap() {
				l.tensors[to] = label
			}
			done[i], progress = true, true
		}
	}
	outLabel := 0
	for _, out := range cfg.GetOutput() {
		t := l.tensors[out.GetName()]
		if t != 0 && outLabel != 0 && t != outLabel {
			return l, Errorf(CodeInvalidArg, "in ensemble %s, the outputs originate from different decoupled models", name)
		}
		outLabel = max(outLabel, t)
	}
	return l, nil
}

// Sequenced reports whether mv's requests take part in sequences: mv has
// sequence batching, or is an ensemble with a step (at any depth) that
// has. A caller that must keep a sequence's requests in order (a gRPC
// stream) hands over the next one once InferRequest.Queued says the last
// is queued.
func (mv *ModelVersion) Sequenced() bool {
	if mv.Config.GetSequenceBatching() != nil {
		return true
	}
	e, ok := mv.exec.(*ensemble)
	return ok && e.sequenced
}

// sequenced reports whether the serving model name takes part in
// sequences; depth bounds the walk through nested ensembles.
func (s *Server) sequenced(name string, depth int) bool {
	cfg := s.servingConfig(name)
	if cfg == nil || depth > 16 {
		return false
	}
	if cfg.GetSequenceBatching() != nil {
		return true
	}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		if s.sequenced(stepKey(st.GetModelNamespace(), st.GetModelName()), depth+1) {
			return true
		}
	}
	return false
}

// ensembleQueued tells an ensemble request's submit when the requests of
// its sequenced steps (those that run on iteration 0) are queued in their
// models, or the request has ended: its next request in the sequence may
// then follow without overtaking it at a stateful step. Triton's ensemble
// scheduler enqueues a request's first steps within its Enqueue
// (triton-inference-server/core src/ensemble_scheduler/ensemble_scheduler.cc).
type ensembleQueued struct {
	mu   sync.Mutex
	left int
	done chan struct{}
}

// step marks one sequenced step's request queued (or refused).
func (q *ensembleQueued) step() {
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
func (q *ensembleQueued) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left > 0 {
		q.left = 0
		close(q.done)
	}
}

func (e *ensemble) submit(j *job) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Errorf(CodeUnavailable, "model is unloading")
	}
	if err := j.ctx.Err(); err != nil {
		e.mu.Unlock()
		return Errorf(CodeCancelled, "request cancelled before it was queued")
	}
	e.wg.Add(1)
	e.mu.Unlock()
	j.times.exec = time.Now()
	j.times.cin = j.times.exec
	j.traceBegin()
	var q *ensembleQueued
	if e.firstSeq > 0 && j.orig.Queued != nil {
		q = &ensembleQueued{left: e.firstSeq, done: make(chan struct{})}
	}
	go e.run(j, q)
	if q != nil {
		// The caller's Queued runs once submit returns.
		<-q.done
	}
	return nil
}

// run executes one ensemble request and answers it.
func (e *ensemble) run(j *job, q *ensembleQueued) {
	defer e.wg.Done()
	r := &j.req
	err := e.execute(j, q)
	if q != nil {
		q.end()
	}
	j.times.cout = time.Now()
	j.times.execEnd = j.times.cout
	if err != nil {
		// Triton counts a failed ensemble request as OTHER, whichever
		// step failed and why (triton-inference-server/core
		// src/ensemble_scheduler/ensemble_scheduler.cc, FinishEnsemble).
		_ = r.Send(&ExecResponse{Err: responseError{err}}, true)
	} else {
		// As Triton, a successful ensemble request is one execution of
		// its batch size; its compute time here is the graph's wall time
		// (Triton sums its steps' compute times).
		e.stats.recordExecution(max(1, r.BatchSize), 0, j.times.cout.Sub(j.times.cin).Nanoseconds(), 0)
	}
	err = r.end(nil, e.name, false)
	j.traceEnd(err)
	j.done <- err
}

func (e *ensemble) close() {
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
func responseCorrelation(corr Correlation, params map[string]any) (*Correlation, error) {
	set := false
	out := Correlation{ID: corr.ID, StringID: corr.StringID, IsString: corr.IsString}
	if v, ok := params["sequence_id"]; ok {
		set = true
		switch v := v.(type) {
		case int64:
			out = Correlation{ID: uint64(v), StringID: strconv.FormatUint(uint64(v), 10)}
		case uint64:
			out = Correlation{ID: v, StringID: strconv.FormatUint(v, 10)}
		case string:
			out = Correlation{StringID: v, IsString: true}
		default:
			return nil, Errorf(CodeInvalidArg, "expected parameter 'sequence_id' to be TRITONSERVER_PARAMETER_INT or TRITONSERVER_PARAMETER_STRING")
		}
	}
	for _, f := range []struct {
		name string
		flag uint32
	}{{"sequence_start", FlagSequenceStart}, {"sequence_end", FlagSequenceEnd}} {
		v, ok := params[f.name]
		if !ok {
			continue
		}
		set = true
		b, isBool := v.(bool)
		if !isBool {
			return nil, Errorf(CodeInvalidArg, "expect parameter '%s' to be TRITONSERVER_PARAMETER_BOOL", f.name)
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
