package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// errorStatus is the HTTP status of err's Triton error class (Triton ≥
// 2.42; INTERNAL for an error without a class).
func errorStatus(err error) int { return protocol.HTTPStatus(protocol.ClassOf(err)) }

// handlerFunc is a route's handler: it writes its reply, or returns the
// error that the route answers, which the route's adapter (Server.handle)
// renders with RenderError, as Caddy's and Prometheus' handlers return
// theirs to one renderer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// StatusError is an error answered with a status of its own rather than
// its Triton class's: the router's 404 and 405, the restricted API's 403,
// a model that is not ready, and the cloud frontends' own refusals
// (SageMaker's and Vertex AI's 400s and 409s).
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string { return e.Msg }

// Errorf is a StatusError with status.
func Errorf(status int, format string, args ...any) error {
	return &StatusError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// Empty is an error answered with its status and no body, as Triton
// answers the platform routes it refuses (src/sagemaker_server.cc and
// src/vertex_ai_server.cc in triton-inference-server/server).
type Empty int

func (e Empty) Error() string { return http.StatusText(int(e)) }

// The router's refusals, and a model version that is not ready: every
// not-ready case, unknown models included, answers 400 as every released
// Triton does (HandleModelReady in triton-inference-server/server
// src/http_server.cc).
var (
	errNotFound         = &StatusError{http.StatusNotFound, "Not Found"}
	errMethodNotAllowed = &StatusError{http.StatusMethodNotAllowed, "Method Not Allowed"}
	errVersionNotReady  = &StatusError{http.StatusBadRequest, "Model version not ready"}
)

// RenderError is the one renderer of the API's errors, which the cloud
// frontends (sagemaker/, vertex/) share: an Empty as its bare status, any
// other error as {"error":"..."} with a StatusError's status, else its
// Triton class's. A refused Content-Encoding also names the ones accepted,
// as Triton's HandleInfer does.
func RenderError(w http.ResponseWriter, err error) {
	var empty Empty
	if errors.As(err, &empty) {
		WriteEmpty(w, int(empty))
		return
	}
	status := errorStatus(err)
	var se *StatusError
	if errors.As(err, &se) {
		status = se.Status
	}
	if errors.Is(err, errUnsupportedEncoding) {
		w.Header().Set("Accept-Encoding", "gzip, deflate")
	}
	WriteError(w, status, err.Error())
}

// WriteError writes Triton's error body {"error":"<msg>"} with status; the
// platform frontends answer their own errors with it.
func WriteError(w http.ResponseWriter, status int, msg string) {
	body := tritonjson.AppendString([]byte(`{"error":`), msg)
	body = append(body, '}')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteEmpty answers status without a body, as Triton does for unknown
// platform routes (text/plain, its HTTP library's default type).
func WriteEmpty(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
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
