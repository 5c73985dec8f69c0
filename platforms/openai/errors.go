package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/protocol"
)

// Error is a route's refusal, rendered in its route family's shape.
type Error struct {
	Status  int
	Message string
	// Type, Param and Code are OpenAI's fields ("" renders null).
	Type, Param, Code string
	// TEIType is TEI's error_type: Validation, Empty, Tokenizer, Backend,
	// Unhealthy, Overloaded (router/src/lib.rs ErrorType).
	TEIType string
	// TEIStatus, when set, is the status on the TEI routes (TEI answers
	// its validation errors 422: router/src/http/server.rs).
	TEIStatus int
}

func (e *Error) Error() string { return e.Message }

// OpenAI's error types (openai/openai-python _exceptions.py reads type,
// param and code from the body).
const (
	invalidRequest = "invalid_request_error"
	serverError    = "server_error"
)

// invalid is a 400 about param (TEI: 422 Validation, as TEI's validation
// errors are).
func invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: invalidRequest, Param: param, TEIType: "Validation",
		TEIStatus: http.StatusUnprocessableEntity}
}

// empty is a 400 for an empty input (TEI: 400 Empty).
func empty(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: invalidRequest, Param: param, TEIType: "Empty"}
}

// modelNotFound is OpenAI's unknown model: 404, code model_not_found.
func modelNotFound(name string) *Error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("The model `%s` does not exist or is not ready.", name),
		Type: invalidRequest, Param: "model", Code: "model_not_found", TEIType: "Validation"}
}

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Message: "Incorrect API key provided.",
	Type: invalidRequest, Code: "invalid_api_key", TEIType: "Unauthorized"}

var errMethod = &Error{Status: http.StatusMethodNotAllowed, Message: "Method Not Allowed", Type: invalidRequest, TEIType: "Validation"}

// family is a route's error shape.
type family uint8

const (
	openAI family = iota
	tei
)

// classify turns any error into an Error: an *Error as it is, a body over
// --http-max-input-size a 413, a core error by its Triton class (an
// unknown model a model_not_found 404).
func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tl *httpapi.BodyTooLarge
	if errors.As(err, &tl) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: err.Error(), Type: invalidRequest, TEIType: "Validation"}
	}
	code := protocol.ClassOf(err)
	status := protocol.HTTPStatus(code)
	out := &Error{Status: status, Message: err.Error(), Type: invalidRequest, TEIType: "Validation"}
	switch {
	case code == core.CodeNotFound:
		out.Status, out.Code = http.StatusNotFound, "model_not_found"
	case code == core.CodeUnavailable:
		out.TEIType = "Unhealthy"
		out.Type = serverError
	case status >= 500:
		out.Type, out.TEIType = serverError, "Backend"
	}
	return out
}

// writeError renders err in fam's shape.
func writeError(w http.ResponseWriter, fam family, err error) {
	e := classify(err)
	var body []byte
	status := e.Status
	if fam == tei {
		if e.TEIStatus != 0 {
			status = e.TEIStatus
		}
		body, _ = json.Marshal(struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
		}{e.Message, e.TEIType})
	} else {
		body, _ = json.Marshal(struct {
			Error openAIError `json:"error"`
		}{openAIError{e.Message, e.Type, nullable(e.Param), nullable(e.Code)}})
	}
	writeJSON(w, status, body)
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
