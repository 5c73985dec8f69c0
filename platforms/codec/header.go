package codec

import (
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
)

// HeaderLengthName is the binary-extension header giving the JSON length.
const HeaderLengthName = "Inference-Header-Content-Length"

// ParseHeaderLength parses an Inference-Header-Content-Length value the way
// Triton does (GetInferenceHeaderLength in triton-inference-server/server
// src/http_server.cc): like C's std::stoi (leading white space,
// an optional sign, decimal digits, anything after them ignored), then
// checked against the body length. 0 means a raw binary request; bodyLen a
// plain JSON request.
func ParseHeaderLength(value string, bodyLen int) (int, error) {
	v, ok, inRange := Stoi(value)
	switch {
	case !ok:
		return 0, core.Errorf(core.CodeInvalidArg, "Unable to parse %s, got: %s", HeaderLengthName, value)
	case !inRange:
		return 0, core.Errorf(core.CodeInvalidArg, "Unable to parse %s, value is out of range [ -2147483648, 2147483647 ], got: %s", HeaderLengthName, value)
	case v < 0 || v > int64(bodyLen):
		return 0, core.Errorf(core.CodeInvalidArg, "inference header size should be in range (0, %s), got: %s", strconv.Itoa(bodyLen), value)
	}
	return int(v), nil
}

// Stoi parses s like C's std::stoi into an int32, as Triton reads every
// header length (the binary extension's header, the SageMaker and Vertex
// content types): leading white space, an optional sign, decimal digits,
// anything after them ignored. ok is false without digits; inRange is
// false beyond int32.
func Stoi(s string) (v int64, ok, inRange bool) {
	t := strings.TrimLeft(s, " \t\n\v\f\r") // C's isspace in the "C" locale
	end := 0
	if end < len(t) && (t[end] == '+' || t[end] == '-') {
		end++
	}
	digits := end
	for end < len(t) && isDigit(t[end]) {
		end++
	}
	if end == digits {
		return 0, false, false
	}
	v, err := strconv.ParseInt(t[:end], 10, 32)
	return v, true, err == nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
