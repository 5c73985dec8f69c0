package core

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core/cache"
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

// ModelVersion is one loaded version of a model. Requests hold it (holds)
// for their whole life, so an unload or reload waits for them.
type ModelVersion struct {
	Name string
	// Namespace is the model's namespace with --model-namespacing (its
	// repository root), empty without.
	Namespace string
	Version   int64
	Config    *modelconfig.ModelConfig
	Labels    map[string][]string
	Stats     *Stats
	// Dir is the model's folder on local disk (a remote model's local
	// copy, a load override's temporary folder), which lives as long as
	// the version: frontends read the files beside config.pbtxt there
	// (a text model's tokenizer.json).
	Dir string

	inputs      map[string]*modelconfig.ModelInput
	outputs     map[string]*modelconfig.ModelOutput
	outputOrder []string // ascending byte order of name

	exec executor
	// seqs is exec when the version is sequence batched, batch when it
	// runs on the default scheduler or dynamic batcher; else nil.
	seqs  SequenceScheduler
	batch BatchScheduler
	// slo is the autopilot's watch of this version (nil: none).
	slo     SLOWatch
	passive []Instance
	starts  []InstanceStart // every instance's, in config order
	insts   []Instance      // every instance, active and passive, for health
	log     *slog.Logger
	holds   *holds
	carry   *metricCarry
	util    utilizationWindow // touched only by Utilization (ORCA reports)
	// handovers are the copies of this version that reloads replaced while
	// sequences were live on them, newest first: requests of those
	// sequences run there (handover.go). Set before the copy serves.
	handovers []*handover
	// reacquire holds the copy serving this version once a reload has
	// replaced this one (handover.go): a START that still reached this
	// copy runs there.
	reacquire atomic.Pointer[func() (*ModelVersion, func(), error)]
	// files is the load override's folder the version was loaded from
	// (nil: the repository's), released once the version is closed.
	files *overrideDir
	// stopping: the server is exiting; new work is refused (exit.go).
	stopping atomic.Bool
	// cache is the server's response cache when this version's config
	// enables it (responsecache.go), else nil.
	cache cache.Store
}

func newModelVersion(name string, version int64, cfg *modelconfig.ModelConfig) *ModelVersion {
	mv := &ModelVersion{
		Name: name, Version: version, Config: cfg, Stats: newStats(), carry: &metricCarry{}, log: slog.New(slog.DiscardHandler),
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
	mv.holds = newHolds()
	return mv
}

// Infer runs one request on this (acquired) version and returns its one
// response: the collect-exactly-one form of InferStream, for a model that
// is not decoupled. Validation errors return before the request is
// scheduled and are not counted as failures (as Triton).
func (mv *ModelVersion) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	j, err := mv.run(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	if j.n != 1 {
		return nil, Errorf(CodeInternal, "model '%s' sent %d responses to a request that expects exactly one", mv.Name, j.n)
	}
	return j.one, nil
}

// InferStream runs one request on this (acquired) version, handing each
// response to emit as the model produces it, in order and one call at a
// time; final marks the last call, whose resp is nil when the model ended
// the request with a final flag alone. It returns once the request is
// complete: nil, or the error that ended it (Rejected when it never ran).
// An error from emit ends the request with that error.
func (mv *ModelVersion) InferStream(ctx context.Context, req *InferRequest, emit func(resp *InferResponse, final bool) error) error {
	if emit == nil {
		emit = discard
	}
	_, err := mv.run(ctx, req, emit)
	return err
}

// run runs one request to its end; with a nil emit the job collects the
// responses itself (Infer's case, without a closure per request).
func (mv *ModelVersion) run(ctx context.Context, req *InferRequest, emit func(*InferResponse, bool) error) (*Job, error) {
	if old, release := mv.handoverFor(req); old != nil {
		defer release()
		return old.run(ctx, req, emit)
	}
	tReq := time.Now()
	var probe cacheProbe // the response cache lookup of a miss
	// hold keeps the response the model sent through emit, for the
	// cache; made only where a cache is on (a variable the closure
	// captured would be allocated for every request).
	var hold **InferResponse
	if mv.cache != nil && emit != nil {
		hold = new(*InferResponse)
		inner := emit
		emit = func(resp *InferResponse, final bool) error {
			if resp != nil {
				*hold = resp
			}
			return inner(resp, final)
		}
	}
	if err := mv.deviceInputs(req); err != nil {
		return nil, err
	}
	j := &Job{ctx: ctx, done: make(chan error, 1), mv: mv, orig: req, emit: emit}
	err := mv.prepare(req, &j.req)
	if err == nil {
		j.req.job = j
		j.times.req = tReq
		j.times.queue = time.Now()
		if err = mv.stopRefusal(&j.req); err == nil && mv.cache != nil {
			var served bool
			if probe, served, err = mv.serveCached(j); served {
				if req.Queued != nil {
					req.Queued()
				}
				return j, err
			}
		}
		if err == nil {
			err = mv.exec.submit(j)
		}
	}
	if errors.Is(err, ErrRetired) {
		return mv.rerun(ctx, req, emit) // handover.go
	}
	if req.Queued != nil {
		req.Queued() // queued, or refused: either way no longer on its way in
	}
	if err != nil {
		return nil, rejected{err}
	}
	err = <-j.done
	end := time.Now()
	if err != nil {
		var c *cancelled
		var r responseError
		var x expired
		switch {
		case errors.As(err, &x):
			mv.Stats.recordFailure(tReq, end, FailRejected)
			return nil, x.error
		case errors.As(err, &c):
			mv.Stats.recordFailure(tReq, end, FailCanceled)
			return nil, Errorf(CodeCancelled, "%s", err.Error())
		case ctx.Err() != nil:
			mv.Stats.recordFailure(tReq, end, FailCanceled)
			return nil, Errorf(CodeCancelled, "request cancelled: %v", err)
		case errors.As(err, &r):
			mv.Stats.recordFailure(tReq, end, FailOther)
			return nil, r.error
		}
		mv.Stats.recordFailure(tReq, end, FailBackend)
		var ce *Error
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, Errorf(CodeInternal, "%s", err.Error())
	}
	mv.Stats.recordSuccess(j.times, time.Now(), j.req.BatchSize)
	if mv.cache != nil {
		resp := j.one
		if resp == nil && hold != nil {
			resp = *hold
		}
		mv.insertCached(ctx, probe, resp)
	}
	return j, nil
}

// responseError marks a failure to build a response from the model's
// outputs (classification, shapes): Triton counts it as OTHER.
type responseError struct{ error }

func (r responseError) Unwrap() error { return r.error }

// response builds the client's view of the outputs: config dims for
// reshaped outputs and classification where asked.
func (mv *ModelVersion) response(req *InferRequest, r *ExecResponse) (*InferResponse, error) {
	var classes map[string]uint64
	for _, o := range req.Outputs {
		if o.ClassCount > 0 {
			if classes == nil {
				classes = map[string]uint64{}
			}
			classes[o.Name] = o.ClassCount
		}
	}
	batching := mv.Config.GetMaxBatchSize() > 0
	resp := &InferResponse{ID: req.ID, ModelName: mv.Name, ModelVersion: mv.Version, Outputs: make([]*Tensor, 0, len(r.Outputs)), Parameters: r.Parameters}
	for _, t := range r.Outputs {
		if cfgOut := mv.outputs[t.Name]; cfgOut != nil {
			t.Shape = responseShape(cfgOut, t.Shape, batching)
		}
		if k := classes[t.Name]; k > 0 {
			ct, err := Classify(t, k, batching, mv.Labels[t.Name])
			if err != nil {
				return nil, responseError{err}
			}
			t = ct
		}
		resp.Outputs = append(resp.Outputs, t)
	}
	return resp, nil
}

// stopHandovers makes the replaced copies mv routes sequences to close
// without waiting for their sequences, and returns channels closed once
// they are closed.
func (mv *ModelVersion) stopHandovers() []<-chan struct{} {
	var out []<-chan struct{}
	for _, h := range mv.handovers {
		out = append(out, h.stop())
	}
	return out
}

// close waits for in-flight requests, then frees the instances and folds
// the copy's counters into its version's metric chain.
func (mv *ModelVersion) close() {
	if mv.slo != nil {
		mv.slo.Stop()
	}
	mv.holds.retire()
	defer mv.carry.closed(mv)
	if mv.exec != nil {
		mv.exec.close()
	}
	for _, inst := range mv.passive {
		_ = inst.Close()
	}
	if mv.files != nil {
		mv.files.release()
	}
}

// Healthy reports why the version cannot serve although it is READY: an
// instance that says it cannot (HealthReporter), or nil. An instance that
// is recovering (ErrRecovering) counts only when no instance is healthy:
// the others serve meanwhile.
func (mv *ModelVersion) Healthy() error {
	var recovering error
	healthy := 0
	for _, inst := range mv.insts {
		h, ok := inst.(HealthReporter)
		if !ok {
			healthy++
			continue
		}
		switch err := h.Healthy(); {
		case err == nil:
			healthy++
		case errors.Is(err, ErrRecovering):
			if recovering == nil {
				recovering = err
			}
		default:
			return err
		}
	}
	if healthy == 0 {
		return recovering
	}
	return nil
}

// deviceInputs copies to host memory every input held in device memory
// that this version's instances do not read in place: all of them unless
// the request runs alone on instances that read that device (no batching,
// sequence or response cache, which combine or hash the bytes on the
// host), and always BYTES, whose elements the core parses.
func (mv *ModelVersion) deviceInputs(req *InferRequest) error {
	for _, t := range req.Inputs {
		if t.Device == nil || (t.DataType != TypeBytes && mv.readsDevice(t.Device.DeviceID())) {
			continue
		}
		if err := t.OnHost(); err != nil {
			return &Error{Code: CodeInternal, Msg: RequestPrefix(req.ID) + err.Error()}
		}
	}
	return nil
}

func (mv *ModelVersion) readsDevice(id int64) bool {
	cfg := mv.Config
	if mv.cache != nil || cfg.GetDynamicBatching() != nil || cfg.GetSequenceBatching() != nil || len(mv.insts) == 0 {
		return false
	}
	for _, inst := range mv.insts {
		if d, ok := inst.(DeviceReader); !ok || !d.ReadsDevice(id) {
			return false
		}
	}
	return true
}
