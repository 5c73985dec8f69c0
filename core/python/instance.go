package python

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// rids numbers requests across every worker (inferd's worker protocol).
var rids atomic.Int64

// instance is one model instance: a worker running TritonPythonModel.
type instance struct {
	b         *Backend
	spec      core.InstanceSpec
	name      string
	model     string
	server    *core.Server
	decoupled bool

	mu      sync.Mutex
	open    map[int64]*openRequest // requests not yet final, by rid
	w       *worker                // the current worker (replaced on a restart)
	closing bool
	// zyg is the model's zygote when its instances are forked
	// (FORK_INSTANCES, fork.go); set before the first spawn.
	zyg *zygote

	// life ends when the instance closes or the backend shuts down: no
	// restart then. supervised is closed when supervise has returned.
	life       context.Context
	end        context.CancelFunc
	supervised chan struct{}
	// attempt is open while a restart of a dead worker is under way or
	// follows at once, and closed when it has succeeded or failed (under
	// mu); nil otherwise.
	attempt chan struct{}
}

// Standby implements core.Standby: while a dead worker's restart is under
// way the scheduler gives the instance no new work.
func (in *instance) Standby() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.attempt == nil || in.closing || in.w.err() == nil {
		return nil
	}
	return in.attempt
}

// liveWorker is the instance's worker; when it died and a restart is under
// way, it waits for that restart (its start is bounded by the stub
// timeout): while one instance of a model restarts the others serve and
// the model stays ready, and an execution handed to the restarting one
// runs on the new worker instead of failing, so a dead instance does not
// drain the queue with failures. Outside an attempt (restarts off, or a
// backoff after failed ones) the error comes at once. A worker that has
// just died may not have been seen by supervise yet: its next request
// (the next of a sequence, sent once the one that ended the worker
// failed) waits for supervise's decision rather than fail for being early.
func (in *instance) liveWorker(ctx context.Context) (*worker, error) {
	in.mu.Lock()
	w, attempt, closing := in.w, in.attempt, in.closing
	in.mu.Unlock()
	err := w.err()
	if err == nil || closing {
		return w, err
	}
	if attempt == nil {
		select {
		case <-w.decided:
		case <-ctx.Done():
			return w, err
		case <-in.life.Done():
			return w, err
		}
		in.mu.Lock()
		now := in.w
		attempt, closing = in.attempt, in.closing
		in.mu.Unlock()
		if now != w {
			return now, now.err() // restarted meanwhile
		}
		if attempt == nil || closing {
			return w, err
		}
	}
	t := time.NewTimer(in.b.opts.StubTimeout)
	defer t.Stop()
	select {
	case <-attempt:
	case <-ctx.Done():
		return w, err
	case <-in.life.Done():
		return w, err
	case <-t.C:
		return w, err
	}
	w = in.worker()
	return w, w.err()
}

// worker is the instance's current worker.
func (in *instance) worker() *worker {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.w
}

// Healthy implements core.HealthReporter: a dead worker, or a model whose
// is_ready() says no (or does not answer within 5 s), is not ready
// (triton-inference-server/python_backend README.md, "is_ready"; a dead
// stub in src/python_be.cc).
func (in *instance) Healthy() error {
	in.mu.Lock()
	w, closing, attempt := in.w, in.closing, in.attempt
	in.mu.Unlock()
	if err := w.err(); err != nil {
		if closing || attempt == nil {
			return err // dead for good, or its restarts fail
		}
		// Being restarted: the model's other instances serve meanwhile.
		return core.Recovering(err)
	}
	if !w.hasIsReady {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case w.ready <- struct{}{}:
		defer func() { <-w.ready }()
	case <-ctx.Done():
		return core.Errorf(core.CodeUnavailable, "Model '%s' is not ready (is_ready() did not answer: an earlier check is still waiting).", in.name)
	}
	reply, err := w.call(ctx, "is_ready", map[string]any{"seq": 0}, nil)
	if err != nil {
		return core.Errorf(core.CodeUnavailable, "Model '%s' is not ready (is_ready() did not answer: %v).", in.name, err)
	}
	var r struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	if err := decode(reply, &r); err != nil {
		return err
	}
	if r.Error != "" {
		in.b.log.Error("is_ready() failed", "model", in.model, "instance", in.name, "err", r.Error)
		return core.Errorf(core.CodeUnavailable, "Model '%s' is not ready: %s", in.name, lastLine(r.Error))
	}
	if !r.Ready {
		return core.Errorf(core.CodeUnavailable, "Model '%s' is not ready (user-defined check failed).", in.name)
	}
	return nil
}

// openRequest is a request the worker has not finished.
type openRequest struct {
	r         *core.ExecRequest
	w         *worker // the worker it was sent to
	responded bool    // a response went out through the sender
	// sends are the model's sends not yet delivered, in order; a
	// goroutine delivers them while sending is set (under instance.mu).
	sends   []func()
	sending bool
	stop    func() bool
}

var _ core.Instance = (*instance)(nil)

// Depth implements core.Pipeliner: the scheduler may hand the instance its
// next execution while one runs, and the worker, having answered one, finds
// the next already in its socket. Waking a sleeping worker for each
// execution cost more than the model code of a small one.
func (in *instance) Depth() int { return depth }

// Execute runs one batch: execute(requests) in the worker. Each request's
// inputs travel once, as blobs of the frame.
func (in *instance) Execute(ctx context.Context, e *core.Execution) error {
	w, err := in.liveWorker(ctx)
	if err != nil {
		return err
	}
	e.ComputeStart = time.Now()
	slot := <-w.slots
	defer func() { w.slots <- slot }()
	out := &frameOut{}
	w.arenaMu.RLock()
	defer w.arenaMu.RUnlock()
	// A decoupled model may read its requests' inputs after execute
	// returned, when the next execution in the slot has overwritten its
	// part of the arena: their inputs come in the frame, which is theirs.
	var inputPart []byte
	if w.arena != nil && !in.decoupled {
		// Each slot has its part of either half: the worker may write the
		// next execution's outputs while this one's are still copied out.
		part := len(w.arena) / 2 / depth
		out.arena, out.arenaBase = w.arena[slot*part:(slot+1)*part], slot*part
		inputPart = out.arena
	}
	reqs := make([]wireRequest, len(e.Requests))
	ridOf := make([]int64, len(e.Requests))
	params := make([]string, len(e.Requests))
	for i, r := range e.Requests {
		p, err := parametersJSON(r.Parameters)
		if err != nil {
			return err // before any request is registered
		}
		params[i] = p
	}
	for i, r := range e.Requests {
		rid := rids.Add(1)
		ridOf[i] = rid
		wr := wireRequest{RID: rid, ID: r.ID, CorrelationID: correlationID(r.Correlation), Flags: r.Correlation.Flags,
			TimeoutUs: r.TimeoutMicros, Parameters: params[i], Requested: r.Outputs, Inputs: make([]tensorDesc, len(r.Inputs))}
		if wr.Requested == nil {
			wr.Requested = []string{}
		}
		for k, t := range r.Inputs {
			wr.Inputs[k] = out.add(t)
		}
		reqs[i] = wr
		o := &openRequest{r: r, w: w}
		// A client that goes away is told to the model (is_cancelled).
		o.stop = context.AfterFunc(r.Context(), func() {
			_ = w.send(map[string]any{"op": "cancel", "rids": []int64{rid}}, nil)
		})
		in.mu.Lock()
		in.open[rid] = o
		in.mu.Unlock()
	}
	e.InferStart = time.Now()
	verbose := in.b.verbose()
	w.poll.sending()
	reply, err := w.exchange(context.WithoutCancel(ctx), true, func(seq int64) any {
		return rawHeader(appendExecute(make([]byte, 0, 256), seq, slot, verbose, reqs))
	}, out)
	e.InferEnd = time.Now()
	if err != nil {
		// The worker died: every request it had fails.
		in.failOf(w, err)
		return err
	}
	reply.arenaIn = inputPart // outputs that are views of this execution's inputs
	if reply.after.After(e.InferStart) {
		// Pipelined: it waited in the socket behind the previous execute,
		// which counts as input time, not as the model's.
		e.InferStart = reply.after
	}
	var done executeDone
	if err := decodeExecuteDone(reply, &done); err != nil {
		// Only this execution's requests: another may be running in the
		// worker meanwhile.
		for _, rid := range ridOf {
			in.finish(rid, &core.ExecResponse{Err: err})
		}
		return err
	}
	if done.Error != "" {
		batchErr := core.Errorf(core.CodeInternal, "%s", done.Error)
		for _, rid := range ridOf {
			in.finish(rid, &core.ExecResponse{Err: batchErr})
		}
		e.ComputeEnd = time.Now()
		return nil
	}
	for i, rid := range ridOf {
		var resp *wireResponse
		if i < len(done.Responses) {
			resp = done.Responses[i]
		}
		switch {
		case done.rescheduled(i):
			in.reschedule(rid) // reschedule.go
		case resp != nil:
			var into map[string][]byte
			if !in.decoupled {
				into = destinations(e.Requests[i])
			}
			in.finish(rid, in.response(resp, reply, into))
		case in.decoupled:
			// Open until its final send.
		default:
			in.closeDefault(rid)
		}
	}
	e.ComputeEnd = time.Now()
	return nil
}

// closeDefault ends a default-mode request the model answered with None:
// through its sender (then a final flag may still be missing), or not at
// all (inferd's text; Triton's return rules are in
// triton-inference-server/python_backend src/pb_stub.cc).
func (in *instance) closeDefault(rid int64) {
	in.mu.Lock()
	o := in.open[rid]
	in.mu.Unlock()
	if o == nil {
		return
	}
	if o.responded {
		in.finish(rid, nil)
		return
	}
	in.finish(rid, &core.ExecResponse{Err: core.Errorf(core.CodeInternal, "Python model '%s' did not produce a response for the request", in.name)})
}

// finish sends a request's final response (nil: a final flag alone) and
// forgets it.
func (in *instance) finish(rid int64, resp *core.ExecResponse) {
	if o := in.take(rid); o != nil {
		_ = o.r.Send(resp, true)
	}
}

// take forgets an open request and stops its watch; nil when rid is not
// open (already final).
func (in *instance) take(rid int64) *openRequest {
	in.mu.Lock()
	o := in.open[rid]
	delete(in.open, rid)
	in.mu.Unlock()
	if o != nil {
		o.stop()
	}
	return o
}

// failAll fails every open request with err.
func (in *instance) failAll(err error) { in.failOf(nil, err) }

// failOf fails the open requests that worker w held (nil: all) with err:
// once a worker has died and another has taken its place, the old one's
// failures must not reach the new one's requests.
func (in *instance) failOf(w *worker, err error) {
	in.mu.Lock()
	var failed []*openRequest
	for rid, o := range in.open {
		if w == nil || o.w == w {
			failed = append(failed, o)
			delete(in.open, rid)
		}
	}
	in.mu.Unlock()
	for _, o := range failed {
		o.stop()
		_ = o.r.Send(&core.ExecResponse{Err: err}, true)
	}
}

// response converts a worker's response; tensors share the frame's bytes,
// or, from the arena, go to their destinations in into (by output name,
// see frameIn.tensorInto) where they fit.
func (in *instance) response(w *wireResponse, f frameIn, into map[string][]byte) *core.ExecResponse {
	if w.Error != nil {
		return &core.ExecResponse{Err: &core.Error{Code: core.Code(w.Error.Code), Msg: w.Error.Message}}
	}
	resp := &core.ExecResponse{Outputs: make([]*core.Tensor, 0, len(w.Outputs))}
	for _, d := range w.Outputs {
		dst := into[d.Name]
		delete(into, d.Name) // a second output of that name must not overwrite the first
		t, err := f.tensorInto(d, dst)
		if err != nil {
			return &core.ExecResponse{Err: core.Errorf(core.CodeInternal, "Python model '%s' sent a broken response: %v", in.name, err)}
		}
		resp.Outputs = append(resp.Outputs, t)
	}
	if w.Parameters != "" && w.Parameters != "{}" {
		params, err := responseParameters(w.Parameters)
		if err != nil {
			return &core.ExecResponse{Err: core.Errorf(core.CodeInternal, "Python model '%s' sent broken response parameters: %v", in.name, err)}
		}
		resp.Parameters = params
	}
	return resp
}

// destinations are r's output destinations (core.ExecRequest.Into) by output
// name, leaving out those that overlap an input: as with ONNX Runtime
// (core/onnxrt), an output never changes an input of its request. Only a
// default-mode model's final response uses them: a decoupled model's
// responses would overwrite each other while the frontend still sends one.
func destinations(r *core.ExecRequest) map[string][]byte {
	var into map[string][]byte
	for i, dst := range r.Into() {
		if len(dst) == 0 || i >= len(r.Outputs) || slices.ContainsFunc(r.Inputs, func(t *core.Tensor) bool { return core.Overlap(t.Data, dst) }) {
			continue
		}
		if into == nil {
			into = make(map[string][]byte, len(r.Outputs))
		}
		into[r.Outputs[i]] = dst
	}
	return into
}

// Close calls finalize and stops the worker, killing it and its children
// if it has not exited within the stub timeout.
func (in *instance) Close() error {
	in.mu.Lock()
	in.closing = true
	w := in.w
	in.mu.Unlock()
	in.end()
	w.stop(in.b.opts.StubTimeout)
	// A restart under way ends with it (its start is cancelled).
	<-in.supervised
	// Its custom metrics go now, not when the goroutine that waits for the
	// exit gets to it: /metrics shows none of them once the unload returns.
	in.b.metrics.drop(w)
	in.b.forgetRestarts(in.key())
	if in.zyg != nil {
		// The last instance's close stops the zygote.
		in.b.releaseZygote(in.zyg)
	}
	in.failAll(errUnhealthy(in.name))
	return nil
}

// mergeConfig copies src into dst (a completed configuration).
func mergeConfig(dst, src *modelconfig.ModelConfig) { proto.Merge(dst, src) }
