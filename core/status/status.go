// Package status holds the inference server's error: a message in
// Triton's wording with Triton's error class (TRITONSERVER_Error_Code in
// triton-inference-server/core include/triton/core/tritonserver.h). It
// imports nothing of the server, so that leaf packages (the JSON parser,
// the stream outbox) can return the errors the frontends render without
// importing the core; the core re-exports it as core.Error.
package status

import (
	"context"
	"errors"
	"fmt"
)

// Code is Triton's error class. Frontends map it to a protocol status
// (HTTP: INTERNAL 500, NOT_FOUND 404, UNAVAILABLE 503, UNSUPPORTED 501,
// everything else 400).
type Code int

// Error classes, as in TRITONSERVER_Error_Code.
const (
	CodeUnknown Code = iota
	CodeInternal
	CodeNotFound
	CodeInvalidArg
	CodeUnavailable
	CodeUnsupported
	CodeAlreadyExists
	CodeCancelled
)

func (c Code) String() string {
	switch c {
	case CodeInternal:
		return "INTERNAL"
	case CodeNotFound:
		return "NOT_FOUND"
	case CodeInvalidArg:
		return "INVALID_ARG"
	case CodeUnavailable:
		return "UNAVAILABLE"
	case CodeUnsupported:
		return "UNSUPPORTED"
	case CodeAlreadyExists:
		return "ALREADY_EXISTS"
	case CodeCancelled:
		return "CANCELLED"
	}
	return "UNKNOWN"
}

// Error is an error with a Triton error class. Its message is what clients
// see, so it follows Triton's wording.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the class of err: the Code of an *Error in its chain,
// CodeCancelled for a cancelled or expired context, else CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return CodeCancelled
	}
	return CodeInternal
}
