package sagemaker

import (
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// binaryMIME is the vendor content type carrying the JSON header length
// (triton-inference-server/server src/sagemaker_server.cc); matched
// case-sensitively, no space after ';'.
const binaryMIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="

// headerSize reads the JSON header length from a raw Content-Type value.
// present is false when ct does not carry the vendor prefix (the whole body
// is JSON). contentLength < 0 (unknown, e.g. chunked) skips the upper bound,
// which the base server then checks against the bytes it reads.
func headerSize(ct string, contentLength int64) (size int, present bool, err error) {
	pos := strings.Index(ct, binaryMIME)
	if pos < 0 {
		return 0, false, nil
	}
	if pos != 0 {
		return 0, true, core.Errorf(core.CodeInvalidArg, "expect MIME type for binary data starts with '%s', got: %s", binaryMIME, ct)
	}
	v, ok, inRange := codec.Stoi(ct[len(binaryMIME):])
	switch {
	case !ok:
		return 0, true, core.Errorf(core.CodeInvalidArg, "Unable to parse json-header-size, got: %s", ct[len(binaryMIME):])
	case !inRange:
		return 0, true, core.Errorf(core.CodeInvalidArg, "Unable to parse json-header-size, value is out of range [ -2147483648, 2147483647 ], got: %s", ct[len(binaryMIME):])
	case v < 0 || (contentLength >= 0 && v > contentLength):
		return 0, true, core.Errorf(core.CodeInvalidArg, "inference header size should be in range (0, %d), got: %d", max(contentLength, 0), v)
	}
	return int(v), true, nil
}

// binaryContentType is the response Content-Type for a reply with binary
// outputs, as src/sagemaker_server.cc sets it.
func binaryContentType(jsonLen int) string { return binaryMIME + strconv.Itoa(jsonLen) }
