package core

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// State is a model version's lifecycle state.
type State int

// Lifecycle states, as the repository index names them.
const (
	StateUnknown State = iota
	StateReady
	StateUnavailable
	StateLoading
	StateUnloading
)

func (s State) String() string {
	return [...]string{"UNKNOWN", "READY", "UNAVAILABLE", "LOADING", "UNLOADING"}[s]
}

// ModelVersion is one loaded version of a model. Requests hold a reference
// (inflight) for their whole life, so an unload or reload waits for them.
type ModelVersion struct {
	Name    string
	Version int64
	Config  *modelconfig.ModelConfig
	Labels  map[string][]string
	Stats   *Stats

	inputs      map[string]*modelconfig.ModelInput
	outputs     map[string]*modelconfig.ModelOutput
	outputOrder []string // ascending byte order of name

	sched    *scheduler
	passive  []Instance
	log      *slog.Logger
	inflight sync.WaitGroup
	carry    *metricCarry
}

func newModelVersion(name string, version int64, cfg *modelconfig.ModelConfig) *ModelVersion {
	mv := &ModelVersion{
		Name: name, Version: version, Config: cfg, Stats: &Stats{}, carry: &metricCarry{}, log: slog.New(slog.DiscardHandler),
		inputs:  map[string]*modelconfig.ModelInput{},
		outputs: map[string]*modelconfig.ModelOutput{},
	}
	for _, in := range cfg.GetInput() {
		mv.inputs[in.GetName()] = in
	}
	for _, out := range cfg.GetOutput() {
		mv.outputs[out.GetName()] = out
		mv.outputOrder = append(mv.outputOrder, out.GetName())
	}
	sort.Strings(mv.outputOrder)
	return mv
}

// Infer runs one request on this (acquired) version. Validation errors
// return before the request is scheduled and are not counted as failures
// (as Triton).
func (mv *ModelVersion) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	tReq := time.Now()
	p, err := mv.prepare(req)
	if err != nil {
		return nil, rejected{err}
	}
	j := &job{ctx: ctx, p: p, done: make(chan error, 1)}
	j.times.req = tReq
	j.times.queue = time.Now()
	if err := mv.sched.submit(j); err != nil {
		return nil, rejected{err}
	}
	err = <-j.done
	end := time.Now()
	if err != nil {
		var c *cancelled
		switch {
		case err == errExpired:
			mv.Stats.recordFailure(tReq, end, FailRejected)
			return nil, errExpired
		case errors.As(err, &c):
			mv.Stats.recordFailure(tReq, end, FailCanceled)
			return nil, Errorf(CodeCancelled, "%s", err.Error())
		case ctx.Err() != nil:
			mv.Stats.recordFailure(tReq, end, FailCanceled)
			return nil, Errorf(CodeCancelled, "request cancelled: %v", err)
		}
		mv.Stats.recordFailure(tReq, end, FailBackend)
		var ce *Error
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, Errorf(CodeInternal, "%s", err.Error())
	}
	b := &p.batch
	j.times.cin, j.times.cout, j.times.execEnd = b.InferStart, b.InferEnd, b.ComputeEnd
	resp, err := mv.response(req, b)
	if err != nil {
		mv.Stats.recordFailure(tReq, time.Now(), FailOther)
		return nil, err
	}
	mv.Stats.recordSuccess(j.times, time.Now(), p.batchSize)
	return resp, nil
}

// response builds the client's view of the outputs: config dims for
// reshaped outputs and classification where asked.
func (mv *ModelVersion) response(req *InferRequest, b *Batch) (*InferResponse, error) {
	classes := map[string]uint64{}
	for _, o := range req.Outputs {
		if o.ClassCount > 0 {
			classes[o.Name] = o.ClassCount
		}
	}
	batching := mv.Config.GetMaxBatchSize() > 0
	resp := &InferResponse{ID: req.ID, ModelName: mv.Name, ModelVersion: mv.Version, Outputs: make([]*Tensor, 0, len(b.Results))}
	for _, t := range b.Results {
		if cfgOut := mv.outputs[t.Name]; cfgOut != nil {
			t.Shape = responseShape(cfgOut, t.Shape, batching)
		}
		if k := classes[t.Name]; k > 0 {
			ct, err := Classify(t, k, batching, mv.Labels[t.Name])
			if err != nil {
				return nil, err
			}
			t = ct
		}
		resp.Outputs = append(resp.Outputs, t)
	}
	return resp, nil
}

// close waits for in-flight requests, then frees the instances and folds
// the copy's counters into its version's metric chain.
func (mv *ModelVersion) close() {
	mv.inflight.Wait()
	defer mv.carry.closed(mv)
	if mv.sched != nil {
		mv.sched.close()
	}
	for _, inst := range mv.passive {
		_ = inst.Close()
	}
}
