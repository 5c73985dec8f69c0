package sagemaker

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
)

// statusError is an error SageMaker answers with a status of its own
// rather than its Triton class's: a route's own refusal (400 for a bad
// record, 409 for a second load), or a base-server reply re-rendered.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// errorf is a statusError.
func errorf(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

// emptyError is answered with its status and no body, as Triton answers
// unknown SageMaker routes (src/sagemaker_server.cc).
type emptyError int

func (e emptyError) Error() string { return http.StatusText(int(e)) }

// writeError is SageMaker's one error renderer: an emptyError as its bare
// status, any other error as Triton's {"error": "..."} body with a
// statusError's status, else its class's (protocol.HTTPStatus), as the
// base server answers it.
func writeError(w http.ResponseWriter, err error) {
	var empty emptyError
	if errors.As(err, &empty) {
		httpapi.WriteEmpty(w, int(empty))
		return
	}
	status := protocol.HTTPStatus(protocol.ClassOf(err))
	if se := (*statusError)(nil); errors.As(err, &se) {
		status = se.status
	}
	httpapi.WriteError(w, status, err.Error())
}

// recordError words an instances mapping failure (platforms/instances) as
// SageMaker's records always have, a 400; other errors pass unchanged.
func recordError(err error) error {
	var ie *instances.Error
	if !errors.As(err, &ie) {
		return err
	}
	msg := ie.Error()
	switch ie.Kind {
	case instances.NotArray:
		msg = `"instances" must be a non-empty array`
	case instances.NotBatching:
		msg = fmt.Sprintf("model '%s' does not support batching: a record holds one instance, got %d", ie.Model, ie.Count)
	case instances.NotKeyed:
		msg = fmt.Sprintf("instance %d: model '%s' has %d inputs, so an instance is an object of input name to value", ie.Instance, ie.Model, len(ie.Inputs))
	case instances.MissingInput:
		msg = fmt.Sprintf("instance 0: missing input '%s'", ie.Input)
	case instances.InputsDiffer:
		if lacks := ie.Lacks(); lacks != "" {
			msg = fmt.Sprintf("instance %d: missing input '%s'", ie.Instance, lacks)
		}
	case instances.ShapeMismatch:
		msg = fmt.Sprintf("instance %d: input '%s' has shape %v, instance 0 has %v", ie.Instance, ie.Input, ie.Shape, ie.First)
	}
	return &statusError{status: http.StatusBadRequest, msg: msg}
}
