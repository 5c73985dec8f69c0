package core

import "time"

// Trace follows one sampled request through the core (Triton's request
// tracing). A request that is not sampled carries a nil Trace, and all it
// costs the core is a nil check; built with the notrace tag, the checks
// compile away (TracingBuilt), which is how the cost of the hooks is
// measured.
//
// The core calls Begin once, when the request is handed to its model's
// scheduler, Output for each response, and End once, when the request's
// end is reported; Child opens the trace of a request this one spawns (an
// ensemble step, a BLS call), after Begin and before End.
type Trace interface {
	// Begin names the model version that serves the request, with the
	// REQUEST_START and QUEUE_START times and the request's inputs as the
	// model receives them (the TENSORS level records them).
	Begin(model string, version int64, requestID string, start, queue time.Time, inputs []*Tensor)
	// Output reports one response's outputs (the TENSORS level records
	// them).
	Output(outputs []*Tensor)
	// End reports the request's remaining times and how it ended (nil:
	// success).
	End(t TraceTimes, err error)
	// Child opens the trace of a request spawned on this one's behalf,
	// linked to it as its parent.
	Child() Trace
}

// TraceTimes are the times of a request's life that Begin did not carry,
// named after Triton's trace timestamps. The compute times are zero for a
// request that did not run on a backend instance (an ensemble's own), or
// that ended before it ran.
type TraceTimes struct {
	ComputeStart       time.Time // COMPUTE_START
	ComputeInputEnd    time.Time // COMPUTE_INPUT_END
	ComputeOutputStart time.Time // COMPUTE_OUTPUT_START
	ComputeEnd         time.Time // COMPUTE_END
	RequestEnd         time.Time // REQUEST_END
}

// Trace is the trace of the client request r belongs to (nil: not
// sampled), for a backend that spawns requests on its behalf (BLS).
func (r *ExecRequest) Trace() Trace {
	if !TracingBuilt || r.job == nil || r.job.orig == nil {
		return nil
	}
	return r.job.orig.Trace
}

// ChildTrace opens a child of t, or returns nil when t is nil.
func ChildTrace(t Trace) Trace {
	if !TracingBuilt || t == nil {
		return nil
	}
	return t.Child()
}

// TraceBegin starts j's trace, if it has one, as it enters an executor.
func (j *Job) TraceBegin() {
	if !TracingBuilt || j.orig.Trace == nil {
		return
	}
	j.orig.Trace.Begin(j.mv.Name, j.mv.Version, j.orig.ID, j.times.req, j.times.queue, j.req.Inputs)
}

// TraceEnd ends j's trace, if it has one, just before its end (err) is
// reported to the caller.
func (j *Job) TraceEnd(err error) {
	if !TracingBuilt || j.orig.Trace == nil {
		return
	}
	t := TraceTimes{RequestEnd: time.Now()}
	if _, ok := j.runner.(BatchScheduler); ok && !j.times.exec.IsZero() {
		t.ComputeStart, t.ComputeInputEnd, t.ComputeOutputStart, t.ComputeEnd = j.times.exec, j.times.cin, j.times.cout, j.times.execEnd
	}
	j.orig.Trace.End(t, err)
}
