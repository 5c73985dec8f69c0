package protocol

import (
	"math"

	"github.com/inferd/inferd/core"
)

// ParseVersion reads a model version string as Triton does on every
// transport (triton-inference-server/server src/common.cc,
// GetModelVersionFromString): "" is core.LatestVersion; otherwise a C
// strtol-style signed 64-bit parse, where leading white space and a sign
// are accepted and anything after the digits is ignored ("1abc" is 1). No
// digits, or a number out of int64 range, and a negative number are
// INVALID_ARG errors. HTTP's routes admit only digits, so for HTTP only the
// out-of-range error is reachable.
func ParseVersion(s string) (int64, error) {
	if s == "" {
		return core.LatestVersion, nil
	}
	neg, u, digits, overflow := CInteger(s)
	if !digits || overflow || (!neg && u > math.MaxInt64) {
		return 0, core.Errorf(core.CodeInvalidArg, "failed to get model version from specified version string '%s' (details: stol), version should be an integral value > 0", s)
	}
	if neg && u != 0 {
		return 0, core.Errorf(core.CodeInvalidArg, "invalid model version specified '%s' , version should be an integral value > 0", s)
	}
	return int64(u), nil
}

// CInteger reads s as C's strtol and C++'s stoi do: leading white space, an
// optional sign, then decimal digits up to the first other byte (the rest
// is ignored). It returns the sign and the magnitude, whether there were
// digits, and whether the magnitude passed 1<<63 (then mag is not it).
func CInteger(s string) (neg bool, mag uint64, digits, overflow bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if mag > (1<<63-d)/10 {
			overflow = true
			continue
		}
		mag = mag*10 + d
	}
	return neg, mag, i > start, overflow
}
