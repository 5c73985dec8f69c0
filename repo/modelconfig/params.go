package modelconfig

import (
	"fmt"
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
