package core

import (
	"errors"

	"github.com/inferd/inferd/core/status"
)

// Code is Triton's error class (status.Code). Frontends map it to a
// protocol status (HTTP: INTERNAL 500, NOT_FOUND 404, UNAVAILABLE 503,
// UNSUPPORTED 501, everything else 400).
type Code = status.Code

// Error classes, as in TRITONSERVER_Error_Code.
const (
	CodeUnknown       = status.CodeUnknown
	CodeInternal      = status.CodeInternal
	CodeNotFound      = status.CodeNotFound
	CodeInvalidArg    = status.CodeInvalidArg
	CodeUnavailable   = status.CodeUnavailable
	CodeUnsupported   = status.CodeUnsupported
	CodeAlreadyExists = status.CodeAlreadyExists
	CodeCancelled     = status.CodeCancelled
)

// Error is an error with a Triton error class (status.Error). Its message
// is what clients see, so it follows Triton's wording.
type Error = status.Error

// Errorf builds an *Error (status.Errorf).
func Errorf(code Code, format string, args ...any) *Error {
	return status.Errorf(code, format, args...)
}

// CodeOf returns the class of err (status.CodeOf).
func CodeOf(err error) Code { return status.CodeOf(err) }

// rejected marks an error that stopped a request before it was scheduled.
type rejected struct{ error }

func (r rejected) Unwrap() error { return r.error }

// expired wraps a queued request's end when its timeout passed before it
// ran.
type expired struct{ error }

func (e expired) Unwrap() error { return e.error }

// Expired is err as a scheduler's answer to a request whose timeout passed
// while it was queued (a sequence's backlog): the core counts it as
// REJECTED, as Triton does, not as a failed inference, and answers err.
func Expired(err error) error { return expired{err} }

// Rejected reports whether err stopped a request before it was in flight:
// the request's validation or a full queue, as opposed to an error of its
// execution. A stream answers the first kind in place of the request and
// the second as a response (triton-inference-server/server
// src/grpc/stream_infer_handler.cc).
func Rejected(err error) bool {
	var r rejected
	return errors.As(err, &r)
}
