package core

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// ensemble is the ensemble scheduler (model-repository.md §11.4): each
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

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // requests in flight
}

type ensembleStep struct {
	model   string
	version int64 // LatestVersion for -1
	// inputs maps each composing-model input to the ensemble tensor it
	// reads; outputs maps each composing-model output it keeps to the
	// ensemble tensor it writes.
	inputs    map[string]string
	outputs   map[string]string
	requested []RequestedOutput
	// slots bounds the step's in-flight requests across every ensemble
	// request (max_inflight_requests); nil when unbounded.
	slots chan struct{}
}

func newEnsemble(srv *Server, cfg *modelconfig.ModelConfig, stats *Stats) *ensemble {
	e := &ensemble{srv: srv, stats: stats, name: cfg.GetName()}
	limit := cfg.GetEnsembleScheduling().GetMaxInflightRequests()
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		step := &ensembleStep{model: st.GetModelName(), version: st.GetModelVersion(), inputs: st.GetInputMap(), outputs: st.GetOutputMap()}
		if step.version < 0 {
			step.version = LatestVersion
		}
		for _, name := range slices.Sorted(maps.Keys(step.outputs)) {
			step.requested = append(step.requested, RequestedOutput{Name: name})
		}
		if limit > 0 {
			step.slots = make(chan struct{}, limit)
		}
		e.steps = append(e.steps, step)
	}
	return e
}

func (e *ensemble) submit(j *job) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Errorf(CodeUnavailable, "model is unloading")
	}
	if err := j.ctx.Err(); err != nil {
		return Errorf(CodeCancelled, "request cancelled before it was queued")
	}
	e.wg.Add(1)
	j.times.exec = time.Now()
	j.times.cin = j.times.exec
	go e.run(j)
	return nil
}

// run executes one ensemble request and answers it.
func (e *ensemble) run(j *job) {
	defer e.wg.Done()
	r := &j.p.req
	outs, err := e.execute(j)
	j.times.cout = time.Now()
	j.times.execEnd = j.times.cout
	if err != nil {
		_ = r.Send(&Response{Err: err}, true)
	} else {
		// As Triton, a successful ensemble request is one execution of
		// its batch size; its compute time here is the graph's wall time
		// (Triton sums its steps' compute times).
		e.stats.recordExecution(max(1, r.BatchSize), 0, j.times.cout.Sub(j.times.cin).Nanoseconds(), 0)
		_ = r.Send(&Response{Outputs: outs}, true)
	}
	j.done <- r.end(nil, e.name, false)
}

type stepResult struct {
	outs []*Tensor // named as ensemble tensors
	err  error
}

// execute runs the graph for one request and returns its requested
// outputs. The first failing step fails the request with its error; the
// steps still running are cancelled.
func (e *ensemble) execute(j *job) ([]*Tensor, error) {
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	r := &j.p.req
	tensors := make(map[string]*Tensor, len(r.Inputs))
	for _, t := range r.Inputs {
		tensors[t.Name] = t
	}
	results := make(chan stepResult, len(e.steps))
	fired := make([]bool, len(e.steps))
	running := 0
	fire := func() {
		for i, st := range e.steps {
			if fired[i] {
				continue
			}
			inputs := make([]*Tensor, 0, len(st.inputs))
			for name, from := range st.inputs {
				t := tensors[from]
				if t == nil {
					inputs = nil
					break
				}
				inputs = append(inputs, &Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
			}
			if inputs == nil {
				continue
			}
			fired[i] = true
			running++
			go func() { results <- e.runStep(ctx, st, inputs, j) }()
		}
	}
	fire()
	var failed error
	for running > 0 {
		res := <-results
		running--
		switch {
		case res.err != nil && failed == nil:
			failed = res.err
			cancel()
		case failed == nil:
			for _, t := range res.outs {
				tensors[t.Name] = t
			}
			fire()
		}
	}
	if failed != nil {
		return nil, failed
	}
	outs := make([]*Tensor, 0, len(r.Outputs))
	for _, name := range r.Outputs {
		t := tensors[name]
		if t == nil {
			return nil, Errorf(CodeInternal, "in ensemble '%s', no step produced output '%s' (an optional input it depends on may be missing)", e.name, name)
		}
		outs = append(outs, t)
	}
	return outs, nil
}

// runStep sends one step's request to its composing model.
func (e *ensemble) runStep(ctx context.Context, st *ensembleStep, inputs []*Tensor, j *job) stepResult {
	if st.slots != nil {
		select {
		case st.slots <- struct{}{}:
			defer func() { <-st.slots }()
		case <-ctx.Done():
			return stepResult{err: context.Cause(ctx)}
		}
	}
	req := &InferRequest{ID: j.p.req.ID, ModelName: st.model, ModelVersion: st.version, Inputs: inputs,
		Outputs: st.requested, Parameters: j.p.req.Parameters, Priority: j.p.priority}
	resp, err := e.srv.Infer(ctx, req)
	if err != nil {
		// Triton names the ensemble, keeping the step's class.
		return stepResult{err: &Error{Code: CodeOf(err), Msg: "in ensemble '" + e.name + "', " + err.Error()}}
	}
	outs := make([]*Tensor, 0, len(resp.Outputs))
	for _, t := range resp.Outputs {
		if name, ok := st.outputs[t.Name]; ok {
			outs = append(outs, &Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
		}
	}
	return stepResult{outs: outs}
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
// their configurations (model-repository.md §11.3). It runs without the
// ensemble's own lock, so two ensembles loading each other fail with a
// cycle instead of waiting on each other.
func (s *Server) loadComposing(ctx context.Context, cfg *modelconfig.ModelConfig) error {
	name := cfg.GetName()
	chain, _ := ctx.Value(ensembleChainKey{}).([]string)
	chain = append(slices.Clone(chain), name)
	ctx = context.WithValue(ctx, ensembleChainKey{}, chain)
	var missing []string
	loadErrs := map[string]error{}
	for _, dep := range composingModels(cfg) {
		if slices.Contains(chain, dep) {
			return Errorf(CodeInvalidArg, "circular dependency between ensembles: %s -> %s", strings.Join(chain, " -> "), dep)
		}
		if err := s.Load(ctx, dep, nil); err != nil {
			s.log.Error("failed to load a composing model", "ensemble", name, "model", dep, "err", err)
			if _, ferr := s.opts.Repos.Find(ctx, dep); !errors.Is(ferr, repo.ErrModelNotFound) {
				loadErrs[dep] = err // there is a folder, and it failed
			}
		}
	}
	configs := map[string]*modelconfig.ModelConfig{}
	for _, st := range cfg.GetEnsembleScheduling().GetStep() {
		v := st.GetModelVersion()
		if v < 0 {
			v = LatestVersion
		}
		mv, release, err := s.Acquire(st.GetModelName(), v)
		if err != nil {
			missing = append(missing, st.GetModelName())
			continue
		}
		configs[st.GetModelName()] = mv.Config
		release()
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		// Triton's texts: a model that tried to load and failed, else one
		// that is not there.
		if err := loadErrs[missing[0]]; err != nil {
			return Errorf(CodeInvalidArg, "ensemble '%s' depends on '%s' which has no loaded version. Model '%s' loading failed with error: %s",
				name, missing[0], missing[0], strings.TrimSpace(err.Error()))
		}
		return Errorf(CodeInvalidArg, "ensemble %s contains models that are not available or ambiguous: %s", name, strings.Join(missing, ", "))
	}
	return validateComposing(cfg, configs)
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
// configurations (model-repository.md §11.3): every mapped name exists,
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
		if m.GetModelTransactionPolicy().GetDecoupled() {
			return Errorf(CodeUnsupported, "ensemble '%s': step model '%s' is decoupled, and ensembles of decoupled models are not supported yet", name, m.GetName())
		}
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
