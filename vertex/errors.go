package vertex

import (
	"errors"
	"net/http"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
)

// badRequest is an error answered with 400 before the base server runs.
func badRequest(msg string) error {
	return &httpapi.StatusError{Status: http.StatusBadRequest, Msg: msg}
}

// writeError is Vertex's one error renderer: the base server's
// (httpapi.RenderError, which answers an httpapi.Empty with its bare
// status, as Triton answers the Vertex routes it refuses in
// triton-inference-server/server src/vertex_ai_server.cc), with 400 for an
// instances mapping failure.
func writeError(w http.ResponseWriter, err error) {
	if ie := (*instances.Error)(nil); errors.As(err, &ie) {
		err = &httpapi.StatusError{Status: http.StatusBadRequest, Msg: err.Error()}
	}
	httpapi.RenderError(w, err)
}
