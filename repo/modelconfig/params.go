package modelconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBool parses a boolean parameter string the way the ONNX Runtime
// backend does: true|on|1 and false|off|0, case-insensitive, nothing else
// (no trimming).
func ParseBool(value string) (bool, error) {
	switch strings.ToLower(value) {
	case "true", "on", "1":
		return true, nil
	case "false", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("failed to convert '%s' to boolean value", value)
}

// StringParameter returns parameters[key].string_value and whether key is
// present.
func StringParameter(cfg *ModelConfig, key string) (string, bool) {
	p, ok := cfg.GetParameters()[key]
	if !ok {
		return "", false
	}
	return p.GetStringValue(), true
}

// ParseInt parses an integer the way Triton's C++ std::stoi does: leading
// white space and a sign are allowed and text after the digits is ignored
// ("2x" is 2), but there must be at least one digit and the value must fit
// in 32 bits.
func ParseInt(s string) (int, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	if end < len(t) && (t[end] == '+' || t[end] == '-') {
		end++
	}
	digits := end
	for end < len(t) && t[end] >= '0' && t[end] <= '9' {
		end++
	}
	if end == digits {
		return 0, fmt.Errorf("failed to convert '%s' to integral number", s)
	}
	v, err := strconv.ParseInt(t[:end], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("failed to convert '%s' to integral number: out of range", s)
	}
	return int(v), nil
}
