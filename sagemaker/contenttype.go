package sagemaker

import (
	"math"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
)

// binaryMIME is the vendor content type carrying the JSON header length
// (platforms.md §1.4); matched case-sensitively, no space after ';'.
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
	v, ok, inRange := stoi(ct[len(binaryMIME):])
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

// stoi parses like C's std::stoi into int32: leading white space, an
// optional sign, decimal digits, anything after them ignored. ok is false
// without digits; inRange is false beyond int32.
func stoi(s string) (v int64, ok, inRange bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var n uint64
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if n <= math.MaxInt32+1 { // past this only the range class matters
			n = n*10 + uint64(s[i]-'0')
		}
	}
	if i == start {
		return 0, false, false
	}
	v = int64(min(n, math.MaxInt32+2)) // clamp keeps the sign flip exact
	if neg {
		v = -v
	}
	return v, true, v >= math.MinInt32 && v <= math.MaxInt32
}

// binaryContentType is the response Content-Type for a reply with binary
// outputs (§1.5, SageMaker row).
func binaryContentType(jsonLen int) string { return binaryMIME + strconv.Itoa(jsonLen) }
