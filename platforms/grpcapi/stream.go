package grpcapi

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/serve"
)

// streamWindow bounds the requests of one stream whose response is not
// yet written (Triton's --grpc-max-response-pool-size,
// triton-inference-server/server docs/customization_guide/deploy.md):
// past it the stream stops reading, so a
// client that does not read its responses is held back by HTTP/2 flow
// control instead of growing the server's memory.
const streamWindow = 1024

// errStreamEnded refuses a decoupled model's response once its stream has
// ended.
var errStreamEnded = core.Errorf(core.CodeCancelled, "the stream has ended")

// streamOut is where a stream's requests hand their results to its
// writer: each request's one result (or a decoupled request's error) on
// ordered, which the window bounds, and a decoupled model's responses in
// an outbox, bounded too, that never makes the model's send wait.
type streamOut struct {
	ordered   chan streamResult
	decoupled *serve.Outbox[streamResult]
}

// streamDraining is the in-band answer to a request read while the
// server drains (triton-inference-server/server
// src/grpc/stream_infer_handler.cc).
const streamDraining = "GRPC server is shutting down and has stopped accepting new requests."

// streamResult is the one response of one stream request.
type streamResult struct {
	// seq is the request's place among the stream's ordered responses,
	// or -1 for a decoupled model's response, written as produced.
	seq  int64
	resp *pb.ModelStreamInferResponse
	// err is set on an asynchronous error (one returned in a response), the
	// kind that ends the stream in triton_grpc_error mode
	// (triton-inference-server/server
	// docs/customization_guide/inference_protocols.md).
	err error
	// more is set on a decoupled model's response that is not the
	// request's last message; resp is nil on the last one when there is
	// nothing to write (a final flag alone; see
	// triton-inference-server/server docs/user_guide/decoupled_models.md).
	more bool
}

// streamRead is how the reading side of a stream ended: after n requests,
// with err nil when the client half-closed.
type streamRead struct {
	n   int64
	err error
}

// ModelStreamInfer serves a bidirectional inference stream
// (triton-inference-server/server src/grpc/stream_infer_handler.cc).
// Each request is converted and validated exactly as ModelInfer
// does and runs concurrently; its one response is written in request
// order (a decoupled model's as soon as it is produced) by one writing
// goroutine. Errors are answered in-band and the stream stays open,
// except in triton_grpc_error mode where the first asynchronous error
// ends the stream with its status. The stream's context is every
// request's: the client cancelling, or the stream ending, cancels them.
//
// A client that does not take a decoupled model's responses as fast as
// they come has them queued up to the outbox's bounds (serve.StreamQueueItems
// responses, serve.StreamQueueBytes bytes as resultSize weighs them);
// past them the stream ends at once with RESOURCE_EXHAUSTED
// (errResponseQueue), what the outbox held is dropped and the stream's
// requests are cancelled. The writer may still wait on the client with
// the responses it took last (no more than the bounds again): this
// handler does not write, so it can return, and its return ends that
// wait. Ordered responses are held back by the window instead.
func (s *Server) ModelStreamInfer(stream pb.GRPCInferenceService_ModelStreamInferServer) error {
	recv := func() (*wireRequest, error) {
		in, err := stream.Recv()
		return plainRequest(in), err
	}
	return s.serveStream(stream.Context(), recv, stream.Send)
}

// errResponseQueue ends a stream whose decoupled responses overflowed the
// queue of those the client has not taken.
var errResponseQueue = status.Errorf(codes.ResourceExhausted,
	"stream response queue exceeded: more than %d responses or %d bytes were waiting for the client to read them (or more bytes than its connection's streams may hold together)",
	serve.StreamQueueItems, serve.StreamQueueBytes)

// serveStream is ModelStreamInfer over recv and send, the stream's
// reading and writing.
func (s *Server) serveStream(sctx context.Context, recv func() (*wireRequest, error), send func(*pb.ModelStreamInferResponse) error) error {
	ctx, cancel := context.WithCancel(sctx)
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	grpcErrorMode := len(md.Get("triton_grpc_error")) > 0 && md.Get("triton_grpc_error")[0] == "true"

	exceeded := make(chan struct{})
	budget, release := s.conns.acquire(ctx)
	defer release()
	out := &streamOut{ordered: make(chan streamResult, streamWindow),
		decoupled: serve.NewOutbox[streamResult](serve.StreamQueueItems, serve.StreamQueueBytes, func(err error) {
			if errors.Is(err, serve.ErrClientBehind) {
				close(exceeded) // once: the outbox fails once
			}
		}).Share(budget)}
	// Once the stream ends, a decoupled model's sends fail.
	defer out.decoupled.Fail(errStreamEnded)
	slots := make(chan struct{}, streamWindow)
	read := make(chan streamRead, 1)
	go func() { read <- s.readStream(ctx, recv, slots, out) }()
	written := make(chan error, 1)
	go func() { written <- writeStream(ctx, send, grpcErrorMode, slots, out, read) }()
	select {
	case err := <-written:
		return err
	case <-exceeded:
		return errResponseQueue
	}
}

// writeStream writes the stream's responses until every request read has
// had its last one written, the reading fails, or the stream ends (ctx).
func writeStream(ctx context.Context, send func(*pb.ModelStreamInferResponse) error, grpcErrorMode bool, slots chan struct{}, out *streamOut, read <-chan streamRead) error {
	pending := map[int64]streamResult{}
	var next, written int64
	total := int64(-1)
	// written counts the requests whose last message is out; each frees
	// its slot of the window.
	write := func(r streamResult) error {
		if r.err != nil && grpcErrorMode {
			return statusError(r.err)
		}
		if r.resp != nil {
			if err := send(r.resp); err != nil {
				return status.Error(codes.Canceled, err.Error())
			}
		}
		if !r.more {
			written++
			<-slots
		}
		return nil
	}
	for total < 0 || written < total {
		select {
		case <-out.decoupled.Wake():
			for _, r := range out.decoupled.Take() {
				if err := write(r); err != nil {
					return err
				}
			}
		case r := <-out.ordered:
			if r.seq < 0 {
				if err := write(r); err != nil {
					return err
				}
				continue
			}
			pending[r.seq] = r
			for {
				p, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if err := write(p); err != nil {
					return err
				}
			}
		case rd := <-read:
			if rd.err != nil {
				return rd.err
			}
			total = rd.n
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

// readStream reads the stream's requests until the client half-closes,
// starting each one; it reports how many it read.
func (s *Server) readStream(ctx context.Context, recv func() (*wireRequest, error), slots chan struct{}, out *streamOut) streamRead {
	var n, seq int64
	var order sequenceOrder
	for {
		in, err := recv()
		if errors.Is(err, io.EOF) {
			return streamRead{n: n}
		}
		if err != nil {
			return streamRead{n: n, err: err}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return streamRead{n: n, err: status.FromContextError(ctx.Err()).Err()}
		}
		n++
		if s.startStreamRequest(ctx, in, seq, out, &order) {
			seq++
		}
	}
}

// startStreamRequest answers a synchronous error at once, or starts the
// inference whose responses the writer receives from out, after the
// stream's earlier requests of its sequence (order). It reports whether
// the request took place seq among the ordered responses: all but a
// decoupled model's requests do.
func (s *Server) startStreamRequest(ctx context.Context, w *wireRequest, seq int64, out *streamOut, order *sequenceOrder) bool {
	in := w.msg
	if s.exiting.Load() {
		deliver(ctx, out.ordered, syncStreamError(seq, in, core.Errorf(core.CodeUnavailable, "%s", streamDraining)))
		return true
	}
	sc := &streamCall{s: s, ctx: ctx, in: in, seq: seq, out: out, order: order}
	// No load report: ModelInfer's goes in the call's trailer, which a
	// stream sends once, when it ends, not per request.
	reply := infer.Reply{Shape: infer.ByPolicy, Render: sc.render}
	call, ok := s.inferCall(w, nil, "ModelStreamInfer", reply.Render)
	if !ok {
		return true
	}
	s.pipe.Dispatch(ctx, &call, s.decoder(w, &sc.conv), reply, sc.send, sc.dispatch)
	return !sc.decoupled
}

// streamCall is one ModelStreamInfer request's run: the state that its
// send, render and dispatch share, in one allocation (closures over
// separate variables would move each to the heap).
type streamCall struct {
	s     *Server
	ctx   context.Context
	in    *pb.ModelInferRequest
	seq   int64
	out   *streamOut
	order *sequenceOrder

	conv               converted
	started, decoupled bool
	leave              func()
	cancel             context.CancelFunc    // a decoupled request's run's
	result             streamResult          // a one-response request's
	run                func(context.Context) // the started call's run
}

// send writes a decoupled model's response as the model sends it.
func (sc *streamCall) send(resp *core.InferResponse, final bool) error {
	// A final flag alone writes nothing unless the client asked for the
	// empty final response; it still frees the slot.
	r := streamResult{seq: -1}
	if resp != nil || sc.conv.emptyFinal {
		r = streamResponse(-1, sc.in, resp, sc.conv.regions, final, !final)
	}
	// The request's last message always goes in: one per request, and
	// the window bounds the requests.
	err := sc.out.decoupled.Put(r, resultSize(r), !r.more)
	if errors.Is(err, serve.ErrOutboxFull) {
		sc.s.log.Warn("ended a ModelStreamInfer stream whose client is not reading: its response queue is full", "model", sc.in.GetModelName(), "id", sc.in.GetId())
		sc.out.decoupled.Fail(serve.ErrClientBehind)
		sc.cancel()
		return serve.ErrClientBehind
	}
	return err
}

// render answers the call: an error before it started at once, a
// decoupled run's end after its responses, a one-response run's result
// kept for delivery once the call has ended.
func (sc *streamCall) render(resp *core.InferResponse, err error) {
	switch {
	case !sc.started:
		deliver(sc.ctx, sc.out.ordered, syncStreamError(sc.seq, sc.in, err))
	case sc.decoupled:
		endDecoupled(sc.in, sc.out, err, sc.cancel, sc.leave)
	default:
		if sc.leave != nil {
			sc.leave()
		}
		// Rendered before the end: outputs in shared memory are written
		// into regions the call still holds. Delivered after it (see
		// start).
		sc.result = unaryStreamResult(sc.seq, sc.in, resp, err, sc.conv.regions)
	}
}

// dispatch takes the started call's place in its sequence's order and
// runs it on a goroutine of its own, so the stream reads its next request.
func (sc *streamCall) dispatch(inf *infer.Inference, run func(context.Context)) {
	var wait <-chan struct{}
	wait, sc.leave = sc.order.enter(inf.Model, inf.Request)
	inf.Request.Queued = sc.leave
	sc.started, sc.decoupled = true, inf.Model.Config.GetModelTransactionPolicy().GetDecoupled()
	sc.run = run
	go sc.start(wait)
}

// start runs the call once the sequence's earlier requests are queued.
func (sc *streamCall) start(wait <-chan struct{}) {
	await(sc.ctx, wait)
	if !sc.decoupled {
		sc.run(sc.ctx)
		// Once the call has ended, as its trace has.
		deliver(sc.ctx, sc.out.ordered, sc.result)
		return
	}
	// The model's send never waits: a response that finds the stream's
	// outbox full fails the outbox, which ends the stream (serveStream)
	// and drops what the outbox held, and ends the request, cancelled, so
	// that a client that does not read holds back neither a Python worker
	// nor an instance, nor the server's memory.
	var reqCtx context.Context
	reqCtx, sc.cancel = context.WithCancel(sc.ctx)
	sc.run(reqCtx)
}

// unaryStreamResult is the stream's message for a one-response request's
// run: its response, or its error (one found before the request was in
// flight is answered as such).
func unaryStreamResult(seq int64, in *pb.ModelInferRequest, resp *core.InferResponse, err error, regions *outputRegions) streamResult {
	switch {
	case err != nil && core.Rejected(err):
		return syncStreamError(seq, in, err)
	case err != nil:
		return asyncStreamError(seq, in, err)
	}
	return streamResponse(seq, in, resp, regions, true, false)
}

// endDecoupled ends a decoupled request's run: its error, if any, after
// its responses in the same outbox; then the run's cancellation and the
// request's place in its sequence are released.
func endDecoupled(in *pb.ModelInferRequest, out *streamOut, err error, cancel context.CancelFunc, leave func()) {
	var r streamResult
	switch {
	case err == nil:
	case core.Rejected(err):
		r = syncStreamError(-1, in, err)
	default:
		r = asyncStreamError(-1, in, err)
	}
	if err != nil {
		_ = out.decoupled.Put(r, resultSize(r), true)
	}
	cancel()
	if leave != nil {
		leave()
	}
}

// await waits for wait to close (nil: at once), or for the stream to end,
// which cancels the request that waits.
func await(ctx context.Context, wait <-chan struct{}) {
	if wait == nil {
		return
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
}

// What a queued result's messages take, about, besides their tensors'
// bytes (measured: 888 bytes for a response of two 4-byte outputs).
const resultOverhead, outputOverhead = 512, 192

// resultSize is about what a result weighs in the stream's outbox: its
// messages, its raw output contents and its error's text.
func resultSize(r streamResult) int {
	resp := r.resp.GetInferResponse()
	n := resultOverhead + outputOverhead*len(resp.GetOutputs()) + len(r.resp.GetErrorMessage())
	for _, c := range resp.GetRawOutputContents() {
		n += len(c)
	}
	return n
}

// deliver hands r to the stream's writer, or gives up when the stream has
// ended (ctx is done), so that no goroutine outlives the stream.
func deliver(ctx context.Context, results chan<- streamResult, r streamResult) {
	select {
	case results <- r:
	case <-ctx.Done():
	}
}

// streamResponse renders one response of a request (nil: the empty final
// response asked for by triton_enable_empty_final_response, with the
// request's names) with its
// triton_final_response parameter. Each response of a decoupled model
// writes its outputs in shared memory into the same regions, as Triton's
// stream allocator does.
func streamResponse(seq int64, in *pb.ModelInferRequest, resp *core.InferResponse, regions *outputRegions, final, more bool) streamResult {
	var out *pb.ModelInferResponse
	if resp == nil {
		out = &pb.ModelInferResponse{Id: in.GetId(), ModelName: in.GetModelName(), ModelVersion: in.GetModelVersion()}
	} else {
		var err error
		if out, err = inferResponse(resp, regions); err == nil {
			err = checkResponseSize(out)
		}
		if err != nil {
			r := asyncStreamError(seq, in, err)
			r.more = more
			return r
		}
	}
	if out.Parameters == nil {
		out.Parameters = map[string]*pb.InferParameter{}
	}
	out.Parameters["triton_final_response"] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: final}}
	return streamResult{seq: seq, resp: &pb.ModelStreamInferResponse{InferResponse: out}, more: more}
}

func finalResponse() *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}
}

// syncStreamError answers an error found before the request was in
// flight: the text, and only the request's id (triton-inference-server/server
// src/grpc/stream_infer_handler.cc, ModelStreamInferHandler::Process).
func syncStreamError(seq int64, in *pb.ModelInferRequest, err error) streamResult {
	return streamResult{seq: seq, resp: &pb.ModelStreamInferResponse{
		ErrorMessage:  err.Error(),
		InferResponse: &pb.ModelInferResponse{Id: in.GetId()},
	}}
}

// asyncStreamError answers an error of a request in flight: the text,
// with the request's id, model name and version string and the final
// flag (triton-inference-server/server src/grpc/stream_infer_handler.cc,
// StreamInferResponseComplete).
func asyncStreamError(seq int64, in *pb.ModelInferRequest, err error) streamResult {
	return streamResult{seq: seq, err: err, resp: &pb.ModelStreamInferResponse{
		ErrorMessage: err.Error(),
		InferResponse: &pb.ModelInferResponse{
			Id: in.GetId(), ModelName: in.GetModelName(), ModelVersion: in.GetModelVersion(),
			Parameters: map[string]*pb.InferParameter{"triton_final_response": finalResponse()},
		},
	}}
}
