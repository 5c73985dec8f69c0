package codec

import (
	"math"
	"strconv"

	"github.com/inferd/inferd/core"
)

// HeaderLengthName is the binary-extension header giving the JSON length.
const HeaderLengthName = "Inference-Header-Content-Length"

// ParseHeaderLength parses an Inference-Header-Content-Length value the way
// Triton does (http-api.md §11.1): like C's std::stoi (leading white space,
// an optional sign, decimal digits, anything after them ignored), then
// checked against the body length. 0 means a raw binary request; bodyLen a
// plain JSON request.
func ParseHeaderLength(value string, bodyLen int) (int, error) {
	i := 0
	for i < len(value) && isCSpace(value[i]) {
		i++
	}
	neg := false
	if i < len(value) && (value[i] == '+' || value[i] == '-') {
		neg = value[i] == '-'
		i++
	}
	start := i
	var n uint64
	overflow := false
	for i < len(value) && isDigit(value[i]) {
		if n > math.MaxInt32+1 {
			overflow = true // keep consuming; only the class matters now
		} else {
			n = n*10 + uint64(value[i]-'0')
		}
		i++
	}
	if i == start {
		return 0, core.Errorf(core.CodeInvalidArg, "Unable to parse %s, got: %s", HeaderLengthName, value)
	}
	v := int64(n)
	if neg {
		v = -v
	}
	if overflow || v > math.MaxInt32 || v < math.MinInt32 {
		return 0, core.Errorf(core.CodeInvalidArg, "Unable to parse %s, value is out of range [ -2147483648, 2147483647 ], got: %s", HeaderLengthName, value)
	}
	if v < 0 || v > int64(bodyLen) {
		return 0, core.Errorf(core.CodeInvalidArg, "inference header size should be in range (0, %s), got: %s", strconv.Itoa(bodyLen), value)
	}
	return int(v), nil
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
