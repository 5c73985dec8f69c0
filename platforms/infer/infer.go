// Package infer is the one path an inference takes through inferd,
// whichever frontend it came in on. A frontend decodes the call and renders
// the answer; everything between happens here, once, in this order:
//
//	lookup      the model and version exist, are ready, and take this
//	            kind of call (a decoupled model refuses /infer and ModelInfer)
//	decode      the frontend's decoder builds the core request against the
//	            model's configuration, the forwarded headers at hand
//	acquire     the version is held until the call ends, so an unload
//	            waits for it
//	log         the request log (--log-verbose)
//	trace       sampling, the receive timestamps, the W3C trace context
//	run         core Infer or InferStream
//	report      the ORCA load report, when the frontend asked for one
//	render      the frontend's Render writes the answer, between the send
//	            timestamps when the call has one response (see Shape)
//	end         the trace's end, the model's and the shared memory's release
//
// The body is read during decode, after the lookup and before the
// acquisition, so a slow upload never holds a model (Triton's order:
// HandleInfer in triton-inference-server/server src/http_server.cc, and
// ModelInferHandler::Execute in src/grpc/infer_handler.cc). Run is the one
// entry (Dispatch its form for a frontend that runs the started call on a
// goroutine of its own), which owns a call from its lookup to its end; a
// frontend hands it a Decoder and a Reply, and calls no step itself. A new step that every
// inference needs (a response cache lookup, a sequence's correlation) is
// one edit in start or run. The decoder reads inputs in
// shared memory in place when their region is guarded against truncation
// (platforms/shm), and copies them out otherwise; the spans it returns,
// those inputs' and the outputs' in shared memory, are held until the
// end, and checked for truncation once the run is over, before a
// response is rendered (an output that is an input's own bytes is copied
// out of the region first, so that rendering never reads a region).
//
// HTTP /infer, /generate and /generate_stream (with SageMaker and Lambda,
// which route to the same handlers), Vertex AI's "instances" predictions,
// and gRPC ModelInfer and ModelStreamInfer all call it. See
// docs/architecture.md.
package infer

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Protocol is the frontend a call came in on: it names the call in the
// request log and its trace timestamps.
type Protocol uint8

// The frontends.
const (
	HTTP Protocol = iota
	GRPC
)

// String is the request log's protocol.
func (p Protocol) String() string {
	if p == GRPC {
		return "GRPC"
	}
	return "HTTP"
}

// stamps are the protocol's trace timestamps, as Triton names them
// (triton-inference-server/server src/http_server.cc and
// src/grpc/infer_handler.h): gRPC has read the message by the time the
// handler runs, so its read end is the handler's start too.
func (p Protocol) stamps() (recvStart, recvEnd, sendStart, sendEnd string) {
	if p == GRPC {
		return "GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"
	}
	return "HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"
}

// Pipeline is what every inference of one frontend shares.
type Pipeline struct {
	Core *core.Server
	// Trace samples requests for tracing; nil traces nothing.
	Trace *trace.Manager
	// Logs are the run-time log settings; Log the logger of the request log.
	Logs *logging.Settings
	Log  *slog.Logger
	// Forward selects the headers forwarded as request parameters
	// (--http-header-forward-pattern, --grpc-header-forward-pattern); nil
	// forwards nothing.
	Forward *protocol.HeaderForwarder
}

// Metadata is a call's headers (HTTP) or metadata (gRPC, which a call's
// context holds), read only when a step needs them: the trace context of a
// sampled request, and the headers to forward.
type Metadata interface {
	Carrier(ctx context.Context) propagation.TextMapCarrier
	Headers(ctx context.Context) map[string][]string
}

// Decoder builds a call's core request for a model whose configuration is
// cfg. fh are the headers to forward (nil: none), which the decoder
// applies where its protocol's order puts them. It returns the
// shared-memory spans the call reads its inputs from in place and writes
// its outputs to (nil: none): the pipeline holds them until the call ends, so that
// a region being unregistered waits for the call and no longer, and
// releases them itself when the decoder fails after taking some.
type Decoder func(cfg *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error)

// Call is one inference call as its frontend hands it over.
type Call struct {
	Protocol Protocol
	// Route is the URL path (HTTP) or the method (gRPC), for the request log.
	Route   string
	Model   string
	Version int64 // core.LatestVersion for the latest ready one
	// Decoupled, when set, is the refusal of a decoupled model: the
	// frontend answers one response per request.
	Decoupled error
	Meta      Metadata
	// Buffered says the call's body is already in memory (a gRPC message):
	// the model is acquired first and the decoder runs against the held
	// version, one lookup instead of two (Triton's ModelInferHandler
	// looks the model up once, then converts the request).
	Buffered bool
}

// Report is a frontend's ORCA load report step: it receives the model once
// the model has answered or refused the request. Nil reports nothing.
type Report func(mv *core.ModelVersion)

// Inference is a call on its way through the core, from its start to its
// end, as Pipeline.Dispatch hands it over.
type Inference struct {
	// Model is the version that runs the request, held until the end.
	Model   *core.ModelVersion
	Request *core.InferRequest

	protocol Protocol
	release  func()
	holds    *shm.Holds
	trace    *trace.Request // nil: not traced (almost always)
	sending  bool
}

// start takes c from lookup to trace, decode building its request. On
// success the call holds the model and its shared memory until end.
func (p *Pipeline) start(ctx context.Context, c *Call, decode Decoder) (Inference, error) {
	recv := p.clock()
	var fh *protocol.ForwardedHeaders
	if p.Forward != nil && c.Meta != nil {
		sel := p.Forward.Select(c.Meta.Headers(ctx))
		fh = &sel
	}
	var (
		mv      *core.ModelVersion
		release func()
		req     *core.InferRequest
		holds   *shm.Holds
		err     error
	)
	if c.Buffered {
		if mv, release, err = protocol.Acquire(p.Core, c.Model, c.Version, c.Decoupled); err != nil {
			return Inference{}, err
		}
		if req, holds, err = decode(mv.Config, fh); err != nil {
			release()
			holds.Release()
			return Inference{}, err
		}
	} else {
		cfg, err := protocol.Lookup(p.Core, c.Model, c.Version, c.Decoupled)
		if err != nil {
			return Inference{}, err
		}
		if req, holds, err = decode(cfg, fh); err != nil {
			holds.Release()
			return Inference{}, err
		}
		if mv, release, err = protocol.Acquire(p.Core, c.Model, c.Version, c.Decoupled); err != nil {
			holds.Release()
			return Inference{}, err
		}
	}
	req.ModelName, req.ModelVersion = c.Model, mv.Version
	p.Logs.LogRequest(ctx, p.Log, c.Protocol.String(), c.Route, req)
	return Inference{Model: mv, Request: req, protocol: c.Protocol, release: release, holds: holds,
		trace: p.startTrace(ctx, c, recv, req)}, nil
}

// clock is the time a call's handling began, when some trace setting is
// on; zero otherwise, so an untraced server reads no clock.
func (p *Pipeline) clock() time.Time {
	if core.TracingBuilt && p.Trace.On() {
		return time.Now()
	}
	return time.Time{}
}

// startTrace samples req for tracing once it is decoded (recv: from
// clock); nil when it is not traced. A W3C traceparent in the call's
// metadata continues the caller's trace in opentelemetry mode.
func (p *Pipeline) startTrace(ctx context.Context, c *Call, recv time.Time, req *core.InferRequest) *trace.Request {
	if recv.IsZero() {
		return nil
	}
	var carrier propagation.TextMapCarrier = propagation.MapCarrier(nil)
	if c.Meta != nil {
		carrier = c.Meta.Carrier(ctx)
	}
	tr := p.Trace.Start(c.Model, carrier)
	if tr == nil {
		return nil
	}
	recvStart, recvEnd, _, _ := c.Protocol.stamps()
	tr.Stamp(recvStart, recv)
	if c.Protocol == GRPC {
		tr.Stamp(recvEnd, recv)
	} else {
		tr.Stamp(recvEnd, time.Now())
	}
	req.Trace = tr.Core()
	return tr
}
