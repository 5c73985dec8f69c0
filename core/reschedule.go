package core

import "errors"

// ErrRescheduled is the end of an execution for a request its model
// rescheduled (Reschedule): its scheduler runs it again.
var ErrRescheduled = errors.New("request rescheduled")

// Reschedule asks for r to run again in a later execution rather than end
// with this one: Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
// (pb_utils' request.set_release_flags), for a model with
// iterative_sequence only. The request keeps its sequence, slot and
// state; it comes back without START. A decoupled model may go on sending
// its non-final responses.
func (r *ExecRequest) Reschedule() error {
	if !r.reschedulable() {
		return Errorf(CodeInvalidArg, "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final {
		return errFinished
	}
	r.rescheduled = true
	return nil
}

// reschedulable reports whether r's scheduler lets its model reschedule it.
func (r *ExecRequest) reschedulable() bool {
	j := r.job
	if j == nil {
		return false
	}
	rs, ok := j.runner.(Rescheduler)
	return ok && rs.Reschedulable(j)
}

// Requeue readies r, which its model rescheduled, for its next execution:
// edit changes its inputs and correlation, under r's lock (a decoupled
// model may still be sending for it).
func (r *ExecRequest) Requeue(edit func(r *ExecRequest)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rescheduled = false
	edit(r)
}
