package infer

import (
	"context"
	"time"

	"github.com/inferd/inferd/core"
)

// Shape is how a call runs and answers.
type Shape uint8

// The shapes.
const (
	// OneResponse runs core Infer, and the frontend writes the one
	// response at once in Render: HTTP /infer, Vertex AI's predictions,
	// gRPC ModelInfer. It is the only shape whose send the trace stamps
	// (HTTP_SEND_START and _END, GRPC_SEND_START and _END around Render).
	OneResponse Shape = iota
	// Streamed runs core InferStream, each response going to Send as the
	// model produces it: /generate and /generate_stream. Their send is not
	// stamped: a stream's responses are sent while the call runs, so no
	// one send has a start and an end to stamp, and /generate, though it
	// answers once, runs as a stream and is stamped as one.
	Streamed
	// ByPolicy is Streamed for a decoupled model and one response for
	// another, without the send's stamps either way: ModelStreamInfer,
	// whose Render hands the response to the stream's writer, which sends
	// it later, among the stream's other requests' responses.
	ByPolicy
)

// Reply is a frontend's side of a call once its decoder has run: how the
// call runs and how its answer is written.
type Reply struct {
	Shape Shape
	// Report is the ORCA load report step (nil: none).
	Report Report
	// Render writes the call's answer: its one response, or the error that
	// ended the call (the start's or the run's). A stream's end comes with
	// no response and the run's error, nil when it ran through. Render
	// runs before the end, which releases the model and the call's
	// shared memory: outputs in shared memory are written while the
	// response is rendered.
	Render func(resp *core.InferResponse, err error)
}

// Send receives a stream's responses as the model produces them
// (core.ModelVersion.InferStream). It is an argument apart from the
// Reply: the core keeps it, and would take a one-response call's Render
// to the heap with it.
type Send func(resp *core.InferResponse, final bool) error

// Run takes c through the whole pipeline on the caller's goroutine: the
// start (lookup, decode, acquire, log, trace; see the package
// documentation), the run in reply's shape with the load report, the
// send's stamps where they apply, reply's Render, and the end, which
// releases the model and the call's shared memory and ends the trace. A
// call that fails to start is rendered and holds nothing. The decoder and
// the reply are arguments and the Inference a value, so that none of them
// allocates in an ordinary call. send receives a stream's responses (nil
// for a call with one response).
func (p *Pipeline) Run(ctx context.Context, c *Call, decode Decoder, reply Reply, send Send) {
	in, err := p.start(ctx, c, decode)
	if err != nil {
		reply.Render(nil, err)
		return
	}
	in.run(ctx, reply.Shape, reply.Report, send, reply.Render)
}

// Dispatch is Run for a frontend that runs the started call itself, on a
// goroutine of its choosing: dispatch receives the call and its run, which
// it calls with the run's context once it is ready for it, and which
// renders and ends the call as Run does. gRPC ModelStreamInfer orders a
// sequence's requests (it needs the model and the request) and runs each
// on a goroutine of its own while it reads the next; /generate_stream
// writes the events on the handler's goroutine while the model runs on
// another. It is a second entry so that Run's reply stays on its caller's
// stack.
func (p *Pipeline) Dispatch(ctx context.Context, c *Call, decode Decoder, reply Reply, send Send, dispatch func(in *Inference, run func(ctx context.Context))) {
	in, err := p.start(ctx, c, decode)
	if err != nil {
		reply.Render(nil, err)
		return
	}
	dispatch(&in, func(ctx context.Context) {
		in.run(ctx, reply.Shape, reply.Report, send, reply.Render)
	})
}

// run is the call's run in its shape, its rendering and its end.
func (in *Inference) run(ctx context.Context, shape Shape, report Report, send Send, render func(*core.InferResponse, error)) {
	defer in.end()
	if shape == Streamed || shape == ByPolicy && in.Model.Config.GetModelTransactionPolicy().GetDecoupled() {
		render(nil, in.stream(ctx, send, report))
		return
	}
	resp, err := in.infer(ctx, report)
	if shape == OneResponse {
		in.sendingStarts()
	}
	render(resp, err)
}

// infer runs a request that has one response, then the load report. A
// region of the call truncated during the run fails it (shm.Holds.Err):
// the inputs read or the outputs written in place were lost.
func (in *Inference) infer(ctx context.Context, report Report) (*core.InferResponse, error) {
	resp, err := in.Model.Infer(ctx, in.Request)
	if report != nil {
		report(in.Model)
	}
	if err == nil {
		in.holds.Detach(resp.Outputs)
		if ferr := in.holds.Err(); ferr != nil {
			return nil, ferr
		}
	}
	return resp, err
}

// stream runs a request whose responses go to send as the model produces
// them (core.ModelVersion.InferStream), then the load report.
func (in *Inference) stream(ctx context.Context, send Send, report Report) error {
	if holds := in.holds; holds != nil {
		plain := send
		send = func(resp *core.InferResponse, final bool) error {
			if resp != nil {
				holds.Detach(resp.Outputs)
			}
			if err := holds.Err(); err != nil {
				return err // a region of the call was truncated
			}
			return plain(resp, final)
		}
	}
	err := in.Model.InferStream(ctx, in.Request, send)
	if report != nil {
		report(in.Model)
	}
	return err
}

// sendingStarts marks the start of the response's sending, for the trace.
func (in *Inference) sendingStarts() {
	if in.trace != nil {
		_, _, start, _ := in.protocol.stamps()
		in.trace.Stamp(start, time.Now())
		in.sending = true
	}
}

// end releases the model and the call's shared-memory spans, and ends the
// trace (with the send's end, after sendingStarts). It runs once the
// answer is rendered: outputs in shared memory are written while it is.
func (in *Inference) end() {
	in.release()
	in.holds.Release()
	if in.trace == nil {
		return
	}
	if in.sending {
		_, _, _, end := in.protocol.stamps()
		in.trace.Stamp(end, time.Now())
	}
	in.trace.Finish()
}
