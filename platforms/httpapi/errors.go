package httpapi

import (
	"errors"
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
// renders with writeError, as Caddy's and Prometheus' handlers return
// theirs to one renderer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// statusError is an error answered with a status of its own rather than
// its Triton class's: the router's 404 and 405, the restricted API's 403,
// a model that is not ready.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// The router's refusals, and a model version that is not ready: every
// not-ready case, unknown models included, answers 400 as every released
// Triton does (HandleModelReady in triton-inference-server/server
// src/http_server.cc).
var (
	errNotFound         = &statusError{http.StatusNotFound, "Not Found"}
	errMethodNotAllowed = &statusError{http.StatusMethodNotAllowed, "Method Not Allowed"}
	errVersionNotReady  = &statusError{http.StatusBadRequest, "Model version not ready"}
)

// writeError writes {"error":"..."} with err's status; every error body in
// the API goes here. A refused Content-Encoding also names the ones
// accepted, as Triton's HandleInfer does.
func writeError(w http.ResponseWriter, err error) {
	status := errorStatus(err)
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
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
