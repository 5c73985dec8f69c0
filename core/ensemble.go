package core

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// stepResult is one message of a step firing: outputs (named as ensemble
// tensors) at an iteration, and whether the firing is over. at is the
// iteration the step fired on; decoupled says whether the step's model
// streams (its outputs then start iterations of their own).
type stepResult struct {
	outs []*Tensor
	// corr, when set, is the correlation the response's parameters gave
	// its outputs (see responseCorrelation).
	corr      *Correlation
	iter      int
	final     bool
	err       error
	at        int
	decoupled bool
}

// A tensor's values are keyed by iteration: 0 for a tensor that does not
// descend from a decoupled step; else one iteration per response of the
// decoupled step it descends from (its label, see ensembleLabels).

// execute runs the graph for one request, sending the ensemble's
// responses: one when no output descends from a decoupled step, else one
// per response that completes the outputs, then a final flag. The first
// failing step fails the request with its error once the steps still
// running are done (they are cancelled).
//
// An iteration's state (its tensors, the steps fired on it, whether it was
// answered) is dropped once no tensor can reach it any more: no step that
// is not decoupled runs on it, nor on iteration 0 (whose tensors every
// iteration may read). So a long stream keeps only the responses in
// flight, and each response costs the same work however many came before.
func (e *ensemble) execute(j *job, q *ensembleQueued) error {
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	r := &j.req
	vals := make(map[string]map[int]*Tensor, len(e.labels))
	for _, t := range r.Inputs {
		vals[t.Name] = map[int]*Tensor{0: t}
	}
	// corrs are the correlations that steps' response parameters gave
	// their outputs, by ensemble tensor and iteration; a step reading one
	// runs under it instead of the request's.
	corrs := map[string]map[int]Correlation{}
	results := make(chan stepResult, 16)
	fired := map[int][]bool{}  // by iteration, by step
	producing := map[int]int{} // firings running that are not decoupled, by iteration
	live := map[int]bool{}     // iterations after 0 not yet dropped
	emitted := map[int]bool{}  // iterations answered
	running, nextIter := 0, 1
	// fire starts the steps whose inputs at iteration it are complete.
	fire := func(it int) {
		for i, st := range e.steps {
			if (st.label == 0) != (it == 0) || (it != 0 && vals[st.labeled][it] == nil) {
				continue // the step does not run on this iteration
			}
			f := fired[it]
			if f == nil {
				f = make([]bool, len(e.steps))
				fired[it] = f
			}
			if f[i] {
				continue
			}
			inputs := make([]*Tensor, 0, len(st.inputs))
			corr, overridden := r.Correlation, false
			for _, name := range st.inputNames {
				from := st.inputs[name]
				key := 0
				if e.labels[from] != 0 {
					key = it
				}
				t := vals[from][key]
				if t == nil {
					inputs = nil
					break
				}
				inputs = append(inputs, &Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
				if c, ok := corrs[from][key]; ok && !overridden {
					// The first input's wins, as in Triton's InitStep.
					corr, overridden = c, true
				}
			}
			if inputs == nil {
				continue
			}
			f[i] = true
			running++
			if !st.decoupled {
				producing[it]++
			}
			var queued func()
			if q != nil && st.sequenced && it == 0 {
				queued = q.step
			}
			go e.runStep(ctx, st, inputs, corr, it, j, queued, results)
		}
	}
	complete := func(it int) []*Tensor {
		outs := make([]*Tensor, 0, len(r.Outputs))
		for _, name := range r.Outputs {
			key := 0
			if e.labels[name] != 0 {
				key = it
			}
			t := vals[name][key]
			if t == nil {
				return nil
			}
			outs = append(outs, t)
		}
		return outs
	}
	var failed error
	// answer sends iteration it's response once its outputs are complete.
	answer := func(it int) {
		if e.outLabel == 0 || it == 0 || emitted[it] || failed != nil {
			return
		}
		if outs := complete(it); outs != nil {
			emitted[it] = true
			if err := r.Send(&ExecResponse{Outputs: outs}, false); err != nil {
				failed = err
				cancel()
			}
		}
	}
	drop := func(it int) {
		if it == 0 || producing[it] > 0 || producing[0] > 0 {
			return
		}
		for _, byIter := range vals {
			delete(byIter, it)
		}
		for _, byIter := range corrs {
			delete(byIter, it)
		}
		delete(fired, it)
		delete(producing, it)
		delete(live, it)
		delete(emitted, it)
	}
	fire(0)
	for running > 0 {
		res := <-results
		if res.final {
			running--
			if !res.decoupled {
				producing[res.at]--
			}
		}
		switch {
		case res.err != nil && failed == nil:
			failed = res.err
			cancel()
		case failed == nil && len(res.outs) > 0:
			it := res.iter
			if it < 0 { // a decoupled step's response starts an iteration
				it, nextIter = nextIter, nextIter+1
				live[it] = true
			}
			for _, t := range res.outs {
				if vals[t.Name] == nil {
					vals[t.Name] = map[int]*Tensor{}
				}
				vals[t.Name][it] = t
				if res.corr != nil {
					if corrs[t.Name] == nil {
						corrs[t.Name] = map[int]Correlation{}
					}
					corrs[t.Name][it] = *res.corr
				}
			}
			if it != 0 {
				answer(it)
				fire(it)
				drop(it)
				break
			}
			// A tensor of iteration 0 may complete any iteration.
			fire(0)
			for l := range live {
				answer(l)
				fire(l)
			}
		}
		if failed != nil || !res.final || res.decoupled {
			continue
		}
		if res.at != 0 {
			drop(res.at)
		} else if producing[0] == 0 {
			for l := range live {
				drop(l)
			}
		}
	}
	if failed != nil {
		return failed
	}
	if e.outLabel != 0 {
		return r.Send(nil, true)
	}
	outs := complete(0)
	if outs == nil {
		return Errorf(CodeInternal, "in ensemble '%s', unexpected deadlock, at least one output is not set while no more ensemble steps can be made", e.name)
	}
	return r.Send(&ExecResponse{Outputs: outs}, true)
}

// runStep sends one step's request to its composing model, under corr,
// calling queued (if any) once the request is queued there; a decoupled
// model's responses each start an iteration (iter -1 in the result).
func (e *ensemble) runStep(ctx context.Context, st *ensembleStep, inputs []*Tensor, corr Correlation, it int, j *job, queued func(), results chan<- stepResult) {
	if st.slots != nil {
		select {
		case st.slots <- struct{}{}:
			defer func() { <-st.slots }()
		case <-ctx.Done():
			results <- stepResult{err: context.Cause(ctx), final: true, at: it, decoupled: st.decoupled}
			return
		}
	}
	req := &InferRequest{ID: j.req.ID, ModelName: st.model, ModelVersion: st.version, Inputs: inputs,
		Outputs: st.requested, Parameters: j.req.Parameters, Priority: j.req.Priority, Correlation: corr,
		Trace: ChildTrace(j.orig.Trace), Queued: queued}
	mv, release, err := e.srv.acquireKey(st.key, st.version)
	if err == nil {
		defer release()
		outIter := it
		if st.decoupled {
			outIter = -1
		}
		err = mv.InferStream(ctx, req, func(resp *InferResponse, _ bool) error {
			if resp == nil {
				return nil
			}
			oc, err := responseCorrelation(corr, resp.Parameters)
			if err != nil {
				return err
			}
			outs := make([]*Tensor, 0, len(resp.Outputs))
			for _, t := range resp.Outputs {
				if name, ok := st.outputs[t.Name]; ok {
					outs = append(outs, &Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
				}
			}
			select {
			case results <- stepResult{outs: outs, corr: oc, iter: outIter}:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}
	if err != nil {
		// Triton names the ensemble, keeping the step's class.
		err = &Error{Code: CodeOf(err), Msg: "in ensemble '" + e.name + "', " + err.Error()}
	}
	results <- stepResult{err: err, final: true, at: it, decoupled: st.decoupled}
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

func (e *ensemble) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.wg.Wait()
}

// ensembleChainKey carries, through the loads an ensemble triggers, the
// ensembles being loaded above it, to refuse circular dependencies.
type ensembleChainKey struct{}

// loadComposing loads every composing model of ensemble cfg (a model that
// is loaded and unchanged is a no-op) and then checks the ensemble against
// their configurations (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc). It runs without the
// ensemble's own lock, so two ensembles loading each other fail with a
// cycle instead of waiting on each other.
//
// It returns the labels the ensemble's outputs inherit: an output without
// a label file of its own takes those of the composing output mapped to
// it, as in triton-inference-server/core
// src/model_repository_manager/model_lifecycle.cc.
//
// With namespacing (namespace is the ensemble's), each step runs the model
// of its name in the ensemble's own namespace, else the one model of that
// name anywhere, as Triton resolves steps (triton-inference-server/core
// src/model_repository_manager/model_repository_manager.cc,
// ConnectDependencyGraph); the step's model_namespace records it.
func (s *Server) loadComposing(ctx context.Context, namespace string, cfg *modelconfig.ModelConfig) (map[string][]string, error) {
	name := repo.Key(namespace, cfg.GetName())
	chain, _ := ctx.Value(ensembleChainKey{}).([]string)
	chain = append(slices.Clone(chain), name)
	ctx = context.WithValue(ctx, ensembleChainKey{}, chain)
	var missing []string
	loadErrs := map[string]error{}
	for _, dep := range composingModels(cfg) {
		keys, own := s.stepKeys(ctx, namespace, dep)
		for _, key := range keys {
			if slices.Contains(chain, key) {
				return nil, Errorf(CodeInvalidArg, "circular dependency between ensembles: %s -> %s", strings.Join(chain, " -> "), key)
			}
		}
		if err := s.loadStep(ctx, namespace, dep, own); err != nil {
			s.log.Error("failed to load a composing model", "ensemble", name, "model", dep, "err", err)
			if s.inRepository(ctx, dep) {
				loadErrs[dep] = err // there is a folder, and it failed
			}
		}
	}
	configs := map[string]*modelconfig.ModelConfig{}
	inherited := map[string][]string{}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		v := st.GetModelVersion()
		if v < 0 {
			v = LatestVersion
		}
		key, err := s.stepTarget(namespace, st.GetModelName())
		if err != nil {
			missing = append(missing, st.GetModelName())
			continue
		}
		st.ModelNamespace = s.idOf(key).namespace
		mv, release, err := s.acquireKey(key, v)
		if err != nil {
			missing = append(missing, st.GetModelName())
			continue
		}
		configs[st.GetModelName()] = mv.Config
		for from, to := range st.GetOutputMap() {
			if l := mv.Labels[from]; l != nil {
				inherited[to] = l
			}
		}
		release()
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		// Triton's texts: a model that tried to load and failed, else one
		// that is not there.
		if err := loadErrs[missing[0]]; err != nil {
			return nil, Errorf(CodeInvalidArg, "ensemble '%s' depends on '%s' which has no loaded version. Model '%s' loading failed with error: %s",
				name, missing[0], missing[0], strings.TrimSpace(err.Error()))
		}
		return nil, Errorf(CodeInvalidArg, "ensemble %s contains models that are not available or ambiguous: %s", name, strings.Join(missing, ", "))
	}
	return inherited, validateComposing(cfg, configs)
}

// composingKeys lists the registry keys of the models an ensemble's steps
// run, sorted.
func composingKeys(cfg *modelconfig.ModelConfig) []string {
	var keys []string
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		keys = append(keys, stepKey(st.GetModelNamespace(), st.GetModelName()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// composingModels lists the models an ensemble's steps name, sorted.
func composingModels(cfg *modelconfig.ModelConfig) []string {
	var names []string
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		names = append(names, st.GetModelName())
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ensembleUse is one place an ensemble tensor appears: an ensemble input
// or output, or a composing model's input or output.
type ensembleUse struct {
	model    string // the model the use is inferred from (the ensemble for its own inputs and outputs)
	dtype    modelconfig.DataType
	dims     []int64 // without the batch dimension
	batching bool
}

// validateComposing checks ensemble cfg against its composing models'
// configurations (triton-inference-server/core
// src/ensemble_scheduler/ensemble_utils.cc): every mapped name exists,
// every required input is mapped, every tensor keeps one datatype and a
// compatible shape, and no composing model batches less than the ensemble.
func validateComposing(cfg *modelconfig.ModelConfig, configs map[string]*modelconfig.ModelConfig) error {
	name := cfg.GetName()
	uses := map[string][]ensembleUse{}
	ensBatching := cfg.GetMaxBatchSize() > 0
	for _, in := range cfg.GetInput() {
		uses[in.GetName()] = append(uses[in.GetName()], ensembleUse{name, in.GetDataType(), ioDims(in.GetDims(), in.GetReshape()), ensBatching})
	}
	for _, out := range cfg.GetOutput() {
		uses[out.GetName()] = append(uses[out.GetName()], ensembleUse{name, out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), ensBatching})
	}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		m := configs[st.GetModelName()]
		if mb := m.GetMaxBatchSize(); mb != 0 && mb < cfg.GetMaxBatchSize() {
			return Errorf(CodeInvalidArg, "ensemble %s allows maximum batch size %d, but it contains model %s which only allows maximum batch size to be %d",
				name, cfg.GetMaxBatchSize(), m.GetName(), mb)
		}
		batching := m.GetMaxBatchSize() > 0
		inputs := map[string]*modelconfig.ModelInput{}
		for _, in := range m.GetInput() {
			inputs[in.GetName()] = in
		}
		for _, key := range slices.Sorted(maps.Keys(st.GetInputMap())) {
			in := inputs[key]
			if in == nil {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapping to non-existing input %s in model %s", name, st.GetInputMap()[key], key, m.GetName())
			}
			t := st.GetInputMap()[key]
			uses[t] = append(uses[t], ensembleUse{m.GetName(), in.GetDataType(), in.GetDims(), batching})
		}
		for _, in := range m.GetInput() {
			if _, ok := st.GetInputMap()[in.GetName()]; !ok && !in.GetOptional() {
				return Errorf(CodeInvalidArg, "in ensemble %s, input %s in model %s is not mapped to any ensemble tensors", name, in.GetName(), m.GetName())
			}
		}
		outputs := map[string]*modelconfig.ModelOutput{}
		for _, out := range m.GetOutput() {
			outputs[out.GetName()] = out
		}
		for _, key := range slices.Sorted(maps.Keys(st.GetOutputMap())) {
			out := outputs[key]
			if out == nil {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s is mapped from non-existing output %s in model %s", name, st.GetOutputMap()[key], key, m.GetName())
			}
			t := st.GetOutputMap()[key]
			uses[t] = append(uses[t], ensembleUse{m.GetName(), out.GetDataType(), ioDims(out.GetDims(), out.GetReshape()), batching})
		}
	}
	labels, err := ensembleLabels(cfg, func(model string) bool { return configs[model].GetModelTransactionPolicy().GetDecoupled() })
	if err != nil {
		return err
	}
	// As Triton, the ensemble is decoupled exactly when a step's model is,
	// whatever its config said.
	cfg.ModelTransactionPolicy = &modelconfig.ModelTransactionPolicy{Decoupled: labels.decoupled}
	for _, t := range slices.Sorted(maps.Keys(uses)) {
		first := uses[t][0]
		for _, u := range uses[t][1:] {
			if u.dtype != first.dtype {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is inferred from model %s while %s is inferred from model %s",
					name, t, first.dtype, first.model, u.dtype, u.model)
			}
			if !dimsCompatible(first, u) {
				return Errorf(CodeInvalidArg, "in ensemble %s, ensemble tensor %s: inconsistent shape: %s is inferred from model %s while %s is inferred from model %s",
					name, t, dimsList(fullShape(first)), first.model, dimsList(fullShape(u)), u.model)
			}
		}
	}
	return nil
}

// ioDims are the dims an input or output shows the ensemble: its reshape
// when it has one.
func ioDims(dims []int64, rs *modelconfig.ModelTensorReshape) []int64 {
	if rs != nil {
		return rs.GetShape()
	}
	return dims
}

// dimsList prints dims as Triton's DimsListToString: [-1,16].
func dimsList(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func fullShape(u ensembleUse) []int64 {
	if u.batching {
		return append([]int64{-1}, u.dims...)
	}
	return u.dims
}

// dimsCompatible compares two uses with -1 as a wildcard, either dims to
// dims or full shape to full shape (so a non-batching model's [-1, d] can
// feed a batching model's [d]).
func dimsCompatible(a, b ensembleUse) bool {
	match := func(x, y []int64) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != -1 && y[i] != -1 && x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return match(a.dims, b.dims) || match(fullShape(a), fullShape(b))
}
