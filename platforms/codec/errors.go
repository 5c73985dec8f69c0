package codec

import (
	"errors"
	"strconv"

	"github.com/inferd/inferd/core"
)

// wrap prefixes err's message as Triton's RETURN_MSG_IF_ERR does
// ("<prefix>: <message>"), keeping its class.
func wrap(prefix string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return &core.Error{Code: ce.Code, Msg: prefix + ": " + ce.Msg}
	}
	return &core.Error{Code: core.CodeInternal, Msg: prefix + ": " + err.Error()}
}

func invalidArg(msg string) error { return &core.Error{Code: core.CodeInvalidArg, Msg: msg} }

// internal is an INTERNAL error, the class of Triton's JSON failures.
func internal(msg string) error { return &core.Error{Code: core.CodeInternal, Msg: msg} }

// JSONTooLargeError is the --http-max-input-size failure for a JSON text of
// n bytes (every endpoint; EVBufferToJson in triton-inference-server/server
// src/http_server.cc).
func JSONTooLargeError(n, limit int64) error {
	return invalidArg("request JSON size of " + strconv.FormatInt(n, 10) +
		" bytes exceeds the maximum allowed input size of " + strconv.FormatInt(limit, 10) +
		" bytes. Use --http-max-input-size to increase the limit.")
}

// RawTooLargeError is the --http-max-input-size failure for a raw binary
// request of n bytes (EVBufferToRawInput in triton-inference-server/server
// src/http_server.cc).
func RawTooLargeError(n, limit int64) error {
	return invalidArg("Raw input has a byte_size (" + strconv.FormatInt(n, 10) +
		" bytes) that exceeds the maximum allowed value of " + strconv.FormatInt(limit, 10) +
		" bytes. Use --http-max-input-size to increase the limit.")
}

func jsonInputTooLargeError(name string, n, limit int64) error {
	return invalidArg("JSON input '" + name + "' has a byte_size (" + strconv.FormatInt(n, 10) +
		" bytes) that exceeds the maximum allowed value of " + strconv.FormatInt(limit, 10) +
		" bytes. Use --http-max-input-size to increase the limit.")
}

// Data-count mismatches of JSON tensors are raised by Triton's JSON layer
// and therefore INTERNAL (500); note the two different spellings. Errors are
// built per call so that no caller can alter a shared value.
func errTooManyElements() error {
	return &core.Error{Code: core.CodeInternal, Msg: "Unable to parse 'data': Shape does not match true shape of 'data' field"}
}

func errTooFewElements() error {
	return &core.Error{Code: core.CodeInternal, Msg: "Failed to parse 'data' field: shape does not match true shape"}
}

func errNestingTooDeep() error {
	return invalidArg("Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (" + strconv.Itoa(MaxDataNesting) + ")")
}

// MaxDataNesting bounds the arrays enclosing a scalar of an input's "data"
// (the data array included): 99 is accepted, 100 is not.
const MaxDataNesting = 100
