package core

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Execution is what a scheduler hands to one instance: the ExecRequests it
// runs at once, in queue order. The instance fills the timestamps, which bracket
// input preparation, the model run and output collection (statistics).
type Execution struct {
	Requests                                       []*ExecRequest
	ComputeStart, InferStart, InferEnd, ComputeEnd time.Time
}

// ExecRequest is one request of an execution as a backend sees it: an
// InferRequest validated, its inputs shaped as the model expects (batch
// dimension first when the model batches), the outputs it asked for and its
// parameters. The backend answers it with ExecResponses through Send.
type ExecRequest struct {
	ID string
	// Inputs in config order; Outputs are the requested names, ascending.
	// For a sequence_batching model the sequence batcher appends, after the
	// config inputs, one tensor per control in control_input order (shape
	// [1, 1] when the model batches, else [1]) and then one per implicit
	// state in state order (input_name, the sequence's current state), and
	// Outputs also hold every state's output_name: the batcher takes those
	// outputs out of the response as the sequence's next state.
	Inputs  []*Tensor
	Outputs []string
	// Parameters are the request's parameters for the model (string,
	// int64, bool or float64 values).
	Parameters map[string]any
	// BatchSize is the request's batch size, 0 for a model that does not
	// batch.
	BatchSize uint64
	// Correlation and the scheduler parameters are the request's, as the
	// client sent them.
	Correlation             Correlation
	Priority, TimeoutMicros uint64

	batch ConcatBatch // the one-request batch of Concatenated, without a copy
	// reply is the one response Concatenated sends, kept here so that it
	// is not allocated per request (Send hands it to the scheduler through
	// an interface, which would move a local to the heap).
	reply ExecResponse
	job   *Job

	// mu guards what follows; it is never held while a consumer takes a
	// response (Send), so the end of an execution, a client going away
	// and a reschedule never wait for a slow consumer.
	mu sync.Mutex
	// final: the request takes no more sends (its final send was taken,
	// or it ended). closed: it ended, with err (nil: success).
	final, closed bool
	err           error
	// delivering is set while a send hands a response to the consumer
	// outside mu: sends of one request take turns (their order), and a
	// detached request's job is finished only once it is unset. turn is
	// made by the first that waits for the delivery, and closed when it
	// is done: a send that nobody waits for makes no channel.
	delivering bool
	turn       chan struct{}
	detached   bool        // still sending after its execution returned
	settled    bool        // a detached request's job was finished
	stop       func() bool // detaches the cancellation hook of a detached request
	// ruled: the execution ended while a send was delivering, and its
	// verdict ends the request once that send is done (unless it was the
	// final one).
	ruled   bool
	verdict error
	// rescheduled: the model asked for another execution (Reschedule,
	// sequence.go); end leaves the request open.
	rescheduled bool
}

// Context is the request's: done when its client goes away.
func (r *ExecRequest) Context() context.Context { return r.job.ctx }

// Into are the destinations of r's outputs (RequestedOutput.Into),
// Outputs[i]'s at index i; nil when none has one. A backend that answers
// each request on its own may write an output there and return a prefix
// of it as the output's Data, as ConcatBatch.Into allows.
func (r *ExecRequest) Into() [][]byte { return r.batch.Into }

// ExecResponse is one response a backend sends for one ExecRequest: its
// outputs (a subset of the request's Outputs) and parameters, or an error
// that ends the request. The core turns it into the caller's InferResponse.
type ExecResponse struct {
	Outputs    []*Tensor
	Parameters map[string]any
	Err        error
}

// ConcatBatch is an execution's requests concatenated along the batch
// dimension, as a BatchInstance receives them (through Concatenated): the
// inputs, already validated and shaped as the model expects, and the
// outputs to produce. The instance fills Results and the timestamps.
type ConcatBatch struct {
	Inputs  []*Tensor
	Outputs []string
	// Into are the destinations of the outputs (RequestedOutput.Into),
	// Outputs[i]'s at index i; nil when none has one, as always for a
	// batch of several requests. A backend may write an output there and
	// return a prefix of it as the result's Data.
	Into [][]byte
	// IntoDevice are the device destinations of the outputs
	// (RequestedOutput.IntoDevice), indexed as Into; nil when none has
	// one. An output written there is returned with Device set to it.
	IntoDevice []DeviceData
	// Results are the produced outputs, in the order of Outputs.
	Results []*Tensor
	// ComputeStart, InferStart, InferEnd and ComputeEnd bracket input
	// preparation, the model run and output collection (statistics).
	ComputeStart, InferStart, InferEnd, ComputeEnd time.Time
}

// errFinished answers a send after the request's final response, or after
// its client went away: Triton's text for a closed response sender
// (triton-inference-server/python_backend src/response_sender.cc).
var errFinished = Errorf(CodeInternal, "Unable to send response. Response sender has been closed.")

// Send delivers one response; final marks the request's last one. A nil
// resp with final set is a final flag without a response (a decoupled
// model that has nothing more to say). A response with Err ends the
// request with that error. Send returns an error when the request can
// take no more responses: it is finished, or its client went away; the
// backend should then stop producing for it.
//
// The consumer takes the response with no lock held: a send waits only for
// the send of the same request before it, so that responses keep their
// order; nothing else waits for the consumer.
func (r *ExecRequest) Send(resp *ExecResponse, final bool) error {
	r.mu.Lock()
	r.awaitDelivery()
	out, err, deliver := r.prepare(resp, final)
	if !deliver {
		r.mu.Unlock()
		return err
	}
	r.delivering = true
	r.final = r.final || final
	r.mu.Unlock()

	err = r.job.hand(out, final)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivering = false
	if r.turn != nil {
		close(r.turn)
		r.turn = nil
	}
	switch {
	case err != nil:
		r.close(err)
	case final:
		r.close(nil)
	case r.ruled:
		r.close(r.verdict)
	}
	r.settle() // the request may have ended while the consumer held it
	return err
}

// awaitDelivery waits, with r.mu held and released while it waits, until
// no send is delivering.
func (r *ExecRequest) awaitDelivery() {
	for r.delivering {
		if r.turn == nil {
			r.turn = make(chan struct{})
		}
		turn := r.turn
		r.mu.Unlock()
		<-turn
		r.mu.Lock()
	}
}

// prepare does what Send does before the consumer takes resp; r.mu is
// held. It reports whether out is to be handed to the consumer, and
// otherwise Send's answer.
func (r *ExecRequest) prepare(resp *ExecResponse, final bool) (out *InferResponse, err error, deliver bool) {
	if r.final {
		return nil, errFinished, false
	}
	j := r.job
	if err := j.ctx.Err(); err != nil {
		err = &cancelled{context.Cause(j.ctx)}
		r.close(err)
		return nil, err, false
	}
	if resp != nil && resp.Err != nil {
		r.close(resp.Err)
		return nil, nil, false
	}
	if j.runner != nil {
		if err := j.runner.Keep(j, resp); err != nil {
			r.close(err)
			return nil, err, false
		}
	}
	if resp != nil {
		if out, err = j.mv.response(j.orig, resp); err != nil {
			r.close(err)
			return nil, err, false
		}
	}
	if resp == nil && !final {
		return nil, nil, false
	}
	if j.runner != nil && j.runner.Preserves() {
		// Held until the job's turn (preserve_ordering): no consumer yet.
		j.held = append(j.held, heldResponse{out, final})
		if final {
			r.close(nil)
		}
		return nil, nil, false
	}
	return out, nil, true
}

// close ends the request with err (nil: success), once; r.mu is held.
func (r *ExecRequest) close(err error) {
	if r.closed {
		return
	}
	r.final, r.closed, r.err = true, true, err
	r.settle()
}

// settle finishes the job of a request left sending after its execution
// returned, once it has ended and no send is delivering; r.mu is held.
func (r *ExecRequest) settle() {
	if !r.detached || !r.closed || r.settled || r.delivering {
		return
	}
	r.settled = true
	if r.stop != nil {
		r.stop()
	}
	r.job.runner.Settle(r.job, r.err)
}

// end closes the request after its execution: it reports how the request
// ended, failing one that sent no final response with execErr (or, when
// the execution succeeded, for never finishing). A decoupled request may
// go on sending after a successful execution: end reports ErrPending, and
// the final send, or the client going away, finishes it. A request whose
// consumer is taking a response is left to that send in the same way
// (ErrPending) rather than waited for: the send ends it once the consumer
// is done, with the verdict end would have given.
func (r *ExecRequest) end(execErr error, model string, decoupled bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	detachable := r.job.runner != nil
	if !detachable {
		// No scheduler to finish the job later (an ensemble's own
		// request, whose sends come from the goroutine that ends it):
		// wait for the send.
		r.awaitDelivery()
	}
	if r.closed {
		return r.err
	}
	if r.rescheduled && execErr == nil {
		return ErrRescheduled
	}
	pending := decoupled && execErr == nil
	if detachable && (pending || r.delivering) {
		r.detached = true
		if !pending {
			r.ruled, r.verdict = true, failed(execErr, model)
		}
		j := r.job
		r.stop = context.AfterFunc(j.ctx, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if !r.final {
				r.close(&cancelled{context.Cause(j.ctx)})
			}
		})
		return ErrPending
	}
	r.final, r.closed, r.err = true, true, failed(execErr, model)
	return r.err
}

// failed is the error of a request that ended without a final response:
// its execution's error, or the model's failure to send one.
func failed(execErr error, model string) error {
	if execErr != nil {
		return execErr
	}
	return Errorf(CodeInternal, "model '%s' returned from execution without sending a final response", model)
}

// ErrPending says a decoupled request is still sending after its
// execution returned; its job is finished by its final send instead.
var ErrPending = Errorf(CodeInternal, "request still pending")

// heldResponse is a response kept back for preserve_ordering.
type heldResponse struct {
	resp  *InferResponse
	final bool
}

// hand gives one response to the consumer: emit, or the job itself when
// it collects (Infer).
func (j *Job) hand(resp *InferResponse, final bool) error {
	if TracingBuilt && resp != nil && j.orig.Trace != nil {
		j.orig.Trace.Output(resp.Outputs)
	}
	if j.emit != nil {
		return j.emit(resp, final)
	}
	if resp != nil {
		j.one = resp
		j.n++
	}
	return nil
}

// release hands the held responses on, in order.
func (j *Job) release() {
	for _, h := range j.held {
		_ = j.hand(h.resp, h.final)
	}
	j.held = nil
}

// Concatenated serves a BatchInstance as an Instance: it gathers the
// requests' inputs into one batch (concatenated along dimension 0, ragged
// inputs flattened, batch inputs computed), runs it, and cuts the outputs
// back into one final response per request, as Triton's dynamic batcher
// does (triton-inference-server/server docs/user_guide/batcher.md and
// docs/user_guide/ragged_batching.md).
func Concatenated(cfg *modelconfig.ModelConfig, inst BatchInstance) Instance {
	return &concatenated{plan: newGatherPlan(cfg), inst: inst}
}

type concatenated struct {
	plan gatherPlan
	inst BatchInstance
}

func (c *concatenated) Execute(ctx context.Context, e *Execution) error {
	b, err := c.plan.gather(e.Requests)
	if err != nil {
		return err
	}
	if err := c.inst.Execute(ctx, b); err != nil {
		return err
	}
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = b.ComputeStart, b.InferStart, b.InferEnd, b.ComputeEnd
	if len(e.Requests) == 1 && b == &e.Requests[0].batch {
		r := e.Requests[0]
		r.reply = ExecResponse{Outputs: b.Results}
		_ = r.Send(&r.reply, true)
		return nil
	}
	outs, errs := c.plan.scatter(b, e.Requests)
	for i, r := range e.Requests {
		r.reply = ExecResponse{Outputs: outs[i], Err: errs[i]}
		_ = r.Send(&r.reply, true)
	}
	return nil
}

func (c *concatenated) Close() error { return c.inst.Close() }

// ReadsDevice passes on the batch instance's answer (DeviceReader): a
// one-request batch reaches it with the request's own tensors.
func (c *concatenated) ReadsDevice(id int64) bool {
	d, ok := c.inst.(DeviceReader)
	return ok && d.ReadsDevice(id)
}

// RunExecution runs jobs as one execution on inst and records it; errs[i]
// is how job i ended (ErrPending: a decoupled request still sending).
// A panic anywhere in the execution's path (gather, the backend, scatter)
// fails the requests that have not finished with an INTERNAL error naming
// the model and logs the stack once; the instance goes on serving.
//
// e and errs are reused from the last call (each worker owns one of each):
// an instance must not keep e past Execute.
func RunExecution(inst Instance, model string, decoupled bool, stats *Stats, jobs []*Job, log *slog.Logger, e *Execution, errs []error) []error {
	*e = Execution{Requests: e.Requests[:0]}
	for _, j := range jobs {
		e.Requests = append(e.Requests, &j.req)
	}
	stats.startRunning(jobs)
	err := execute(inst, model, e, jobs, log)
	if err == nil {
		var total uint64
		for _, j := range jobs {
			total += uint64(j.size)
		}
		stats.recordExecution(total, e.InferStart.Sub(e.ComputeStart).Nanoseconds(),
			e.InferEnd.Sub(e.InferStart).Nanoseconds(), e.ComputeEnd.Sub(e.InferEnd).Nanoseconds())
	}
	errs = errs[:0]
	for _, j := range jobs {
		j.times.cin, j.times.cout, j.times.execEnd = e.InferStart, e.InferEnd, e.ComputeEnd
		errs = append(errs, j.req.end(err, model, decoupled))
		if errs[len(errs)-1] != ErrPending { // else its final send ends it
			stats.EndRunning(j)
		}
	}
	clear(e.Requests)
	return errs
}

// execute runs e on inst, turning a panic into an error.
func execute(inst Instance, model string, e *Execution, jobs []*Job, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("recovered from a panic while executing a batch", "model", model, "requests", len(jobs), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = Errorf(CodeInternal, "model '%s' failed to execute the request: internal error: %v", model, r)
		}
	}()
	ctx := context.Background()
	if len(jobs) == 1 && jobs[0].ctx != nil {
		// A lone request may be abandoned mid-run; a batch runs for all.
		ctx = jobs[0].ctx
	}
	return inst.Execute(ctx, e)
}
