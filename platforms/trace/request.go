package trace

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// Request is the trace of one sampled client request: the frontend's
// timestamps, the request to the model it names and the requests it
// spawns (ensemble steps, BLS calls). The frontend passes Core to the
// core and calls Finish once the response is sent.
type Request struct {
	m  *Manager
	st *setting

	root *node

	// mu guards every node's buf, nodes and finished (triton mode). A
	// child may record while Finish reads: a Python model's BLS call
	// from a background thread, or a decoupled model's request that goes
	// on after its final response, can outlive the client's response.
	// Only traced requests take it.
	mu       sync.Mutex
	nodes    []*node // every node, the root first (triton mode's records)
	finished bool    // Finish has run: later records are dropped
	// tensorBytes are the TENSORS records held, capped at
	// maxTraceTensorBytes; dropped counts those refused past the cap.
	tensorBytes int
	dropped     uint64

	// opentelemetry mode: the InferRequest span, parent of the model span.
	ctx  context.Context
	span oteltrace.Span
}

// node is the trace of one request to a model: the client's, or one it
// spawned. Its methods are called in sequence by the request's path
// through the core (Begin, Output, End); the nodes of one Request may be
// called concurrently with each other and with Finish, so buf is written
// under the Request's mutex.
type node struct {
	r          *Request
	id, parent uint64
	up         *node  // the parent node, nil for the root
	buf        []byte // triton mode: this trace id's records, comma separated (r.mu)

	ctx  context.Context // opentelemetry mode: holds the model span
	span oteltrace.Span
}

var _ core.Trace = (*node)(nil)

func (m *Manager) newRequest(st *setting, parent context.Context) *Request {
	r := &Request{m: m, st: st}
	r.root = &node{r: r, id: m.ids.Add(1)}
	r.nodes = []*node{r.root}
	if m.otel != nil {
		if parent == nil {
			parent = context.Background()
		}
		r.ctx, r.span = m.otel.tracer.Start(parent, "InferRequest", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
	}
	return r
}

// Core is the trace the core follows (InferRequest.Trace).
func (r *Request) Core() core.Trace { return r.root }

// ID is the request's trace id (the triton mode's "id" of its records).
func (r *Request) ID() uint64 { return r.root.id }

// Stamp records one frontend timestamp (HTTP_RECV_START, GRPC_SEND_END,
// ...) on the request's trace.
func (r *Request) Stamp(name string, t time.Time) {
	if r.st.level&LevelTimestamps == 0 {
		return
	}
	if r.span != nil {
		r.span.AddEvent(name, oteltrace.WithTimestamp(t))
		return
	}
	r.root.stamp(name, t)
}

// Finish ends the trace once the response is sent: the triton mode writes
// the request's records, the opentelemetry mode ends the InferRequest span.
// What a child records after Finish (an async BLS call that outlives the
// response) is dropped, as is a second Finish.
func (r *Request) Finish() {
	if r.span != nil {
		r.span.End()
		return
	}
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return
	}
	r.finished = true
	var out []byte
	for _, n := range r.nodes {
		if len(n.buf) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(out, n.buf...)
	}
	r.mu.Unlock()
	if len(out) > 0 {
		r.st.write(out)
	}
}

// maxTraceTensorBytes caps the TENSORS records one trace holds until it
// finishes: a decoupled model may send responses without end on one
// request, each adding its outputs. Past the cap its tensor records are
// dropped (and logged once); its timestamps are kept.
const maxTraceTensorBytes = 16 << 20

// record appends one record, unless the trace is finished.
func (n *node) record(rec []byte) {
	n.r.mu.Lock()
	defer n.r.mu.Unlock()
	if n.r.finished {
		return
	}
	n.appendLocked(rec)
}

// recordTensor appends one TENSORS record, unless the trace is finished
// or holds maxTraceTensorBytes of them already.
func (n *node) recordTensor(rec []byte) {
	n.r.mu.Lock()
	defer n.r.mu.Unlock()
	if n.r.finished {
		return
	}
	if n.r.tensorBytes+len(rec) > maxTraceTensorBytes {
		if n.r.dropped == 0 {
			n.r.m.log.Warn("dropping the trace's tensor records past its cap", "trace_id", n.r.root.id, "cap_bytes", maxTraceTensorBytes)
		}
		n.r.dropped++
		return
	}
	n.r.tensorBytes += len(rec)
	n.appendLocked(rec)
}

// appendLocked appends rec to the node's records; n.r.mu is held.
func (n *node) appendLocked(rec []byte) {
	if len(n.buf) > 0 {
		n.buf = append(n.buf, ',')
	}
	n.buf = append(n.buf, rec...)
}

// stamp appends {"id":N,"timestamps":[{"name":"X","ns":T}]}, unless the
// trace is finished.
func (n *node) stamp(name string, t time.Time) {
	var a [96]byte // the record, on the stack for the usual names
	rec := append(a[:0], `{"id":`...)
	rec = strconv.AppendUint(rec, n.id, 10)
	rec = append(rec, `,"timestamps":[{"name":"`...)
	rec = append(rec, name...)
	rec = append(rec, `","ns":`...)
	rec = strconv.AppendInt(rec, n.r.m.steadyNs(t), 10)
	n.record(append(rec, "}]}"...))
}

func (n *node) timestamps() bool { return n.r.st.level&LevelTimestamps != 0 }

// tensors is the TENSORS level, which only the triton mode records (as
// Triton, whose opentelemetry mode logs that it cannot).
func (n *node) tensors() bool { return n.r.st.level&LevelTensors != 0 && n.r.span == nil }

func (n *node) Begin(model string, version int64, requestID string, start, queue time.Time, inputs []*core.Tensor) {
	if n.r.span != nil {
		n.beginSpan(model, version, requestID, start, queue)
		return
	}
	if n.timestamps() {
		b := append([]byte(`{"id":`), strconv.FormatUint(n.id, 10)...)
		b = append(b, `,"model_name":`...)
		b = tritonjson.AppendString(b, model)
		b = append(b, `,"model_version":`...)
		b = strconv.AppendInt(b, version, 10)
		if requestID != "" {
			b = append(b, `,"request_id":`...)
			b = tritonjson.AppendString(b, requestID)
		}
		if n.parent != 0 {
			b = append(b, `,"parent_id":`...)
			b = strconv.AppendUint(b, n.parent, 10)
		}
		n.record(append(b, '}'))
		n.stamp("REQUEST_START", start)
		n.stamp("QUEUE_START", queue)
	}
	if n.tensors() {
		for _, t := range inputs {
			n.tensor("TENSOR_QUEUE_INPUT", t)
		}
	}
}

func (n *node) Output(outputs []*core.Tensor) {
	if n.tensors() {
		for _, t := range outputs {
			n.tensor("TENSOR_BACKEND_OUTPUT", t)
		}
	}
}

func (n *node) End(t core.TraceTimes, err error) {
	if n.r.span != nil {
		n.endSpan(t, err)
		return
	}
	if !n.timestamps() {
		return
	}
	if !t.ComputeStart.IsZero() {
		n.stamp("COMPUTE_START", t.ComputeStart)
		n.stamp("COMPUTE_INPUT_END", t.ComputeInputEnd)
		n.stamp("COMPUTE_OUTPUT_START", t.ComputeOutputStart)
		n.stamp("COMPUTE_END", t.ComputeEnd)
	}
	n.stamp("REQUEST_END", t.RequestEnd)
}

func (n *node) Child() core.Trace {
	c := &node{r: n.r, id: n.r.m.ids.Add(1), parent: n.id, up: n}
	n.r.mu.Lock()
	if !n.r.finished { // else c records nothing: no need to keep it
		n.r.nodes = append(n.r.nodes, c)
	}
	n.r.mu.Unlock()
	return c
}

// beginSpan starts the model span: a child of the InferRequest span for
// the client's request, of the parent's model span for a spawned one,
// with Triton's attributes and the REQUEST_START and QUEUE_START events.
func (n *node) beginSpan(model string, version int64, requestID string, start, queue time.Time) {
	parent := n.r.ctx
	if n.up != nil && n.up.ctx != nil {
		parent = n.up.ctx
	}
	attrs := []attribute.KeyValue{
		attribute.String("triton.model_name", model),
		attribute.Int64("triton.model_version", version),
		attribute.Int64("triton.trace_id", int64(n.id)),
		attribute.Int64("triton.trace_parent_id", int64(n.parent)),
	}
	if requestID != "" {
		attrs = append(attrs, attribute.String("triton.request_id", requestID))
	}
	n.ctx, n.span = n.r.m.otel.tracer.Start(parent, model, oteltrace.WithTimestamp(start),
		oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithAttributes(attrs...))
	n.span.AddEvent("REQUEST_START", oteltrace.WithTimestamp(start))
	n.span.AddEvent("QUEUE_START", oteltrace.WithTimestamp(queue))
}

// endSpan records the compute span (a child of the model span, with the
// COMPUTE_* events) and ends the model span at REQUEST_END.
func (n *node) endSpan(t core.TraceTimes, err error) {
	if n.span == nil {
		return
	}
	if !t.ComputeStart.IsZero() {
		_, cs := n.r.m.otel.tracer.Start(n.ctx, "compute", oteltrace.WithTimestamp(t.ComputeStart), oteltrace.WithSpanKind(oteltrace.SpanKindServer))
		cs.AddEvent("COMPUTE_START", oteltrace.WithTimestamp(t.ComputeStart))
		cs.AddEvent("COMPUTE_INPUT_END", oteltrace.WithTimestamp(t.ComputeInputEnd))
		cs.AddEvent("COMPUTE_OUTPUT_START", oteltrace.WithTimestamp(t.ComputeOutputStart))
		cs.AddEvent("COMPUTE_END", oteltrace.WithTimestamp(t.ComputeEnd))
		cs.End(oteltrace.WithTimestamp(t.ComputeEnd))
	}
	n.span.AddEvent("REQUEST_END", oteltrace.WithTimestamp(t.RequestEnd))
	if err != nil {
		n.span.SetStatus(codes.Error, err.Error())
	}
	n.span.End(oteltrace.WithTimestamp(t.RequestEnd))
}

// tensor appends a TENSORS record: {"id":N,"activity":A,"tensor":{"name",
// "data","shape","dtype"}}, the data as Triton prints it (comma-separated
// values, BYTES elements quoted, nothing for FP16 and BF16).
func (n *node) tensor(activity string, t *core.Tensor) {
	b := append([]byte(`{"id":`), strconv.FormatUint(n.id, 10)...)
	b = append(b, `,"activity":"`...)
	b = append(b, activity...)
	b = append(b, `","tensor":{"name":`...)
	b = tritonjson.AppendString(b, t.Name)
	b = append(b, `,"data":`...)
	b = tritonjson.AppendString(b, tensorData(t))
	b = append(b, `,"shape":"`...)
	for i, d := range t.Shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	b = append(b, `","dtype":"`...)
	b = append(b, t.DataType.String()...)
	n.recordTensor(append(b, `"}}`...))
}
