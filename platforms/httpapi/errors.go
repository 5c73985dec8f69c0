package httpapi

import (
	"errors"
	"net/http"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// statusOf maps Triton's error classes to HTTP (Triton ≥ 2.42).
func statusOf(code core.Code) int {
	switch code {
	case core.CodeInternal:
		return http.StatusInternalServerError
	case core.CodeNotFound:
		return http.StatusNotFound
	case core.CodeUnavailable:
		return http.StatusServiceUnavailable
	case core.CodeUnsupported:
		return http.StatusNotImplemented
	}
	return http.StatusBadRequest
}

// writeError writes {"error":"..."}; every error body in the API goes here.
func writeError(w http.ResponseWriter, err error) {
	code := core.CodeInternal
	var ce *core.Error
	if errors.As(err, &ce) {
		code = ce.Code
	}
	writeErrorStatus(w, statusOf(code), err.Error())
}

func writeErrorStatus(w http.ResponseWriter, status int, msg string) {
	body := codec.AppendString([]byte(`{"error":`), msg)
	body = append(body, '}')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeJSON writes a 200 JSON body.
func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// writeEmpty writes a bodiless reply; health and ready replies are text/plain
// as in Triton.
func writeEmpty(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}
