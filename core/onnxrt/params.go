package onnxrt

import (
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// param returns the string_value of a config parameter.
func param(cfg *modelconfig.ModelConfig, key string) (string, bool) {
	return modelconfig.StringParameter(cfg, key)
}

// intParam parses an integer parameter, def when absent.
func intParam(cfg *modelconfig.ModelConfig, key string, def int) (int, error) {
	s, ok := param(cfg, key)
	if !ok {
		return def, nil
	}
	return parseInt(s)
}

// boolParam parses a bool parameter; ok is false when absent.
func boolParam(cfg *modelconfig.ModelConfig, key string) (v, ok bool, err error) {
	s, ok := param(cfg, key)
	if !ok {
		return false, false, nil
	}
	v, err = parseBool(s)
	return v, true, err
}

// parseInt parses like C++ std::stoi, which Triton uses.
func parseInt(s string) (int, error) {
	v, err := modelconfig.ParseInt(s)
	if err != nil {
		return 0, core.Errorf(core.CodeInvalidArg, "%v", err)
	}
	return v, nil
}

// parseUint64 parses like std::stoull (a leading '-' wraps, as in C++; we
// reject it instead, since no unsigned option means a negative number).
func parseUint64(s string) (uint64, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	t = strings.TrimPrefix(t, "+")
	end := 0
	for end < len(t) && t[end] >= '0' && t[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, core.Errorf(core.CodeInvalidArg, "failed to convert '%s' to unsigned long long integral number", s)
	}
	v, err := strconv.ParseUint(t[:end], 10, 64)
	if err != nil {
		return 0, core.Errorf(core.CodeInvalidArg, "failed to convert '%s' to unsigned long long integral number: out of range", s)
	}
	return v, nil
}

// parseBool accepts Triton's spellings, case-insensitively.
func parseBool(s string) (bool, error) {
	v, err := modelconfig.ParseBool(s)
	if err != nil {
		return false, core.Errorf(core.CodeInvalidArg, "%v", err)
	}
	return v, nil
}

// ortBool renders a bool as ORT config entries want it.
func ortBool(v bool) string {
	if v {
		return "1"
	}
	return "0"
}
