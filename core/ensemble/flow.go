package ensemble

import (
	"context"

	"github.com/inferd/inferd/core"
)

// stepResult is one message of a step firing: outputs (named as ensemble
// tensors) at an iteration, and whether the firing is over. at is the
// iteration the step fired on; decoupled says whether the step's model
// streams (its outputs then start iterations of their own).
type stepResult struct {
	outs []*core.Tensor
	// corr, when set, is the correlation the response's parameters gave
	// its outputs (see responseCorrelation).
	corr      *core.Correlation
	iter      int
	final     bool
	err       error
	at        int
	decoupled bool
}

// flow is one ensemble request's data flow while its graph runs. A
// tensor's values are keyed by iteration: 0 for a tensor that does not
// descend from a decoupled step; else one iteration per response of the
// decoupled step it descends from (its label, see labelsOf).
type flow struct {
	e   *ensemble
	j   *core.Job
	q   *stepsQueued
	ctx context.Context
	// cancel stops the steps still running once one failed.
	cancel  context.CancelFunc
	results chan stepResult

	vals map[string]map[int]*core.Tensor // by ensemble tensor, by iteration
	// corrs are the correlations that steps' response parameters gave
	// their outputs, by ensemble tensor and iteration; a step reading one
	// runs under it instead of the request's.
	corrs     map[string]map[int]core.Correlation
	fired     map[int][]bool // by iteration, by step
	producing map[int]int    // firings running that are not decoupled, by iteration
	live      map[int]bool   // iterations after 0 not yet dropped
	emitted   map[int]bool   // iterations answered
	running   int            // firings not over
	nextIter  int
	failed    error // the first failure; the request ends with it
}

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
func (e *ensemble) execute(j *core.Job, q *stepsQueued) error {
	ctx, cancel := context.WithCancel(j.Request().Context())
	defer cancel()
	f := &flow{e: e, j: j, q: q, ctx: ctx, cancel: cancel, results: make(chan stepResult, 16),
		vals: make(map[string]map[int]*core.Tensor, len(e.labels)), corrs: map[string]map[int]core.Correlation{},
		fired: map[int][]bool{}, producing: map[int]int{}, live: map[int]bool{}, emitted: map[int]bool{}, nextIter: 1}
	r := j.Request()
	for _, t := range r.Inputs {
		f.vals[t.Name] = map[int]*core.Tensor{0: t}
	}
	f.fire(0)
	for f.running > 0 {
		f.take(<-f.results)
	}
	if f.failed != nil {
		return f.failed
	}
	if e.outLabel != 0 {
		return r.Send(nil, true)
	}
	outs := f.complete(0)
	if outs == nil {
		return core.Errorf(core.CodeInternal, "in ensemble '%s', unexpected deadlock, at least one output is not set while no more ensemble steps can be made", e.name)
	}
	return r.Send(&core.ExecResponse{Outputs: outs}, true)
}

// take records one message of a step firing: its outputs start or feed
// an iteration, which may complete a response and fire further steps; a
// firing's end may drop the iterations nothing can reach any more.
func (f *flow) take(res stepResult) {
	if res.final {
		f.running--
		if !res.decoupled {
			f.producing[res.at]--
		}
	}
	switch {
	case res.err != nil && f.failed == nil:
		f.fail(res.err)
	case f.failed == nil && len(res.outs) > 0:
		f.store(res)
	}
	if f.failed != nil || !res.final || res.decoupled {
		return
	}
	if res.at != 0 {
		f.drop(res.at)
	} else if f.producing[0] == 0 {
		for l := range f.live {
			f.drop(l)
		}
	}
}

// fail ends the request with err, cancelling the steps still running.
func (f *flow) fail(err error) {
	f.failed = err
	f.cancel()
}

// store keeps a step's outputs at their iteration (a decoupled step's
// response starts one) and moves the graph on from there.
func (f *flow) store(res stepResult) {
	it := res.iter
	if it < 0 { // a decoupled step's response starts an iteration
		it, f.nextIter = f.nextIter, f.nextIter+1
		f.live[it] = true
	}
	for _, t := range res.outs {
		if f.vals[t.Name] == nil {
			f.vals[t.Name] = map[int]*core.Tensor{}
		}
		f.vals[t.Name][it] = t
		if res.corr != nil {
			if f.corrs[t.Name] == nil {
				f.corrs[t.Name] = map[int]core.Correlation{}
			}
			f.corrs[t.Name][it] = *res.corr
		}
	}
	if it != 0 {
		f.answer(it)
		f.fire(it)
		f.drop(it)
		return
	}
	// A tensor of iteration 0 may complete any iteration.
	f.fire(0)
	for l := range f.live {
		f.answer(l)
		f.fire(l)
	}
}

// fire starts the steps whose inputs at iteration it are complete.
func (f *flow) fire(it int) {
	for i, st := range f.e.steps {
		if (st.label == 0) != (it == 0) || (it != 0 && f.vals[st.labeled][it] == nil) {
			continue // the step does not run on this iteration
		}
		fired := f.fired[it]
		if fired == nil {
			fired = make([]bool, len(f.e.steps))
			f.fired[it] = fired
		}
		if fired[i] {
			continue
		}
		inputs, corr := f.inputs(st, it)
		if inputs == nil {
			continue
		}
		fired[i] = true
		f.running++
		if !st.decoupled {
			f.producing[it]++
		}
		var queued func()
		if f.q != nil && st.sequenced && it == 0 {
			queued = f.q.step
		}
		go f.e.runStep(f.ctx, st, inputs, corr, it, f.j, queued, f.results)
	}
}

// inputs are step st's inputs at iteration it, named as its model's, and
// the correlation it runs under; nil while one is missing.
func (f *flow) inputs(st *step, it int) ([]*core.Tensor, core.Correlation) {
	inputs := make([]*core.Tensor, 0, len(st.inputs))
	corr, overridden := f.j.Request().Correlation, false
	for _, name := range st.inputNames {
		from := st.inputs[name]
		key := 0
		if f.e.labels[from] != 0 {
			key = it
		}
		t := f.vals[from][key]
		if t == nil {
			return nil, corr
		}
		inputs = append(inputs, &core.Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
		if c, ok := f.corrs[from][key]; ok && !overridden {
			// The first input's wins, as in Triton's InitStep.
			corr, overridden = c, true
		}
	}
	return inputs, corr
}

// complete is iteration it's outputs, in the request's order; nil while
// one is missing.
func (f *flow) complete(it int) []*core.Tensor {
	r := f.j.Request()
	outs := make([]*core.Tensor, 0, len(r.Outputs))
	for _, name := range r.Outputs {
		key := 0
		if f.e.labels[name] != 0 {
			key = it
		}
		t := f.vals[name][key]
		if t == nil {
			return nil
		}
		outs = append(outs, t)
	}
	return outs
}

// answer sends iteration it's response once its outputs are complete.
func (f *flow) answer(it int) {
	if f.e.outLabel == 0 || it == 0 || f.emitted[it] || f.failed != nil {
		return
	}
	if outs := f.complete(it); outs != nil {
		f.emitted[it] = true
		if err := f.j.Request().Send(&core.ExecResponse{Outputs: outs}, false); err != nil {
			f.fail(err)
		}
	}
}

// drop forgets iteration it once nothing can reach it any more.
func (f *flow) drop(it int) {
	if it == 0 || f.producing[it] > 0 || f.producing[0] > 0 {
		return
	}
	for _, byIter := range f.vals {
		delete(byIter, it)
	}
	for _, byIter := range f.corrs {
		delete(byIter, it)
	}
	delete(f.fired, it)
	delete(f.producing, it)
	delete(f.live, it)
	delete(f.emitted, it)
}

// runStep sends one step's request to its composing model, under corr,
// calling queued (if any) once the request is queued there; a decoupled
// model's responses each start an iteration (iter -1 in the result).
func (e *ensemble) runStep(ctx context.Context, st *step, inputs []*core.Tensor, corr core.Correlation, it int, j *core.Job, queued func(), results chan<- stepResult) {
	if st.slots != nil {
		select {
		case st.slots <- struct{}{}:
			defer func() { <-st.slots }()
		case <-ctx.Done():
			results <- stepResult{err: context.Cause(ctx), final: true, at: it, decoupled: st.decoupled}
			return
		}
	}
	r := j.Request()
	req := &core.InferRequest{ID: r.ID, ModelName: st.model, ModelVersion: st.version, Inputs: inputs,
		Outputs: st.requested, Parameters: r.Parameters, Priority: r.Priority, Correlation: corr,
		Trace: core.ChildTrace(j.Caller().Trace), Queued: queued}
	mv, release, err := e.host.Acquire(st.key, st.version)
	if err == nil {
		defer release()
		outIter := it
		if st.decoupled {
			outIter = -1
		}
		err = mv.InferStream(ctx, req, func(resp *core.InferResponse, _ bool) error {
			if resp == nil {
				return nil
			}
			oc, err := responseCorrelation(corr, resp.Parameters)
			if err != nil {
				return err
			}
			outs := make([]*core.Tensor, 0, len(resp.Outputs))
			for _, t := range resp.Outputs {
				if name, ok := st.outputs[t.Name]; ok {
					outs = append(outs, &core.Tensor{Name: name, DataType: t.DataType, Shape: t.Shape, Data: t.Data})
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
		err = &core.Error{Code: core.CodeOf(err), Msg: "in ensemble '" + e.name + "', " + err.Error()}
	}
	results <- stepResult{err: err, final: true, at: it, decoupled: st.decoupled}
}
