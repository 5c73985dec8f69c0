package python

import (
	"slices"

	"github.com/inferd/inferd/core"
)

// rescheduled reports whether the model released request i of the
// execution with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE.
func (d *executeDone) rescheduled(i int) bool { return slices.Contains(d.Reschedule, i) }

// reschedule hands a request its model released with
// TRITONSERVER_REQUEST_RELEASE_RESCHEDULE (request.set_release_flags) back
// to the sequence batcher, which runs it again under a new rid
// (core.ExecRequest.Reschedule; triton-inference-server/python_backend
// README.md, "Request Rescheduling"). The model's sends went through
// before execute returned, as Triton asks of a decoupled model. Refused
// (a model without iterative_sequence), the request ends with the error.
func (in *instance) reschedule(rid int64) {
	o := in.take(rid)
	if o == nil {
		return
	}
	if err := o.r.Reschedule(); err != nil {
		_ = o.r.Send(&core.ExecResponse{Err: err}, true)
	}
}
