package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// errorStatus is the HTTP status of err's Triton error class (Triton ≥
// 2.42; INTERNAL for an error without a class).
func errorStatus(err error) int { return protocol.HTTPStatus(protocol.ClassOf(err)) }

// writeError writes {"error":"..."}; every error body in the API goes here.
func writeError(w http.ResponseWriter, err error) {
	writeErrorStatus(w, errorStatus(err), err.Error())
}

func writeErrorStatus(w http.ResponseWriter, status int, msg string) { WriteError(w, status, msg) }

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
