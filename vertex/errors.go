package vertex

import (
	"errors"
	"net/http"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
)

// badRequest is an error answered with 400 before the base server runs.
type badRequest string

func (e badRequest) Error() string { return string(e) }

// emptyError is answered with its status and no body, as Triton answers
// Vertex routes it refuses (triton-inference-server/server
// src/vertex_ai_server.cc).
type emptyError int

func (e emptyError) Error() string { return http.StatusText(int(e)) }

// writeError is Vertex's one error renderer: an emptyError as its bare
// status, any other error as Triton's {"error": ...} body, with 400 for a
// badRequest or an instances mapping failure and the error's class status
// otherwise, as the base route answers it.
func writeError(w http.ResponseWriter, err error) {
	var empty emptyError
	if errors.As(err, &empty) {
		httpapi.WriteEmpty(w, int(empty))
		return
	}
	status := protocol.HTTPStatus(protocol.ClassOf(err))
	if errors.As(err, new(badRequest)) || errors.As(err, new(*instances.Error)) {
		status = http.StatusBadRequest
	}
	httpapi.WriteError(w, status, err.Error())
}
