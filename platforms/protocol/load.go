package protocol

import (
	"maps"
	"slices"
	"strings"

	"github.com/inferd/inferd/core"
)

// The repository's load and unload parameters, read once for both
// transports. Triton's HTTP and gRPC frontends read them with separate
// code whose texts and leniency clients see, so the reader keeps each
// transport's rules (HTTPRules, GRPCRules) side by side:
//
//	key                HTTPRules                      GRPCRules
//	config             a string (JSON text)           string_param
//	file:<path>        a string, the file's base64,   bytes_param, the file's bytes
//	                   read leniently (LenientBase64)
//	any other key      INTERNAL "unexpected error     "unrecognized load parameter"
//	                   on creating Triton parameter"
//	unload_dependents  a bool; any other value is     bool_param, anything else
//	                   ignored                        an error
//
// (triton-inference-server/server src/http_server.cc, HandleRepositoryControl;
// src/grpc/grpc_server.cc, RepositoryModelLoad and RepositoryModelUnload.)
// HTTP's values that are not strings are refused before, by the body's
// reader, with TritonJson's texts.

// ReadLoadParams reads load parameters by a transport's rules (HTTPRules
// or GRPCRules): "config" is a ModelConfig's JSON text, "file:<path>" a
// file of the model's directory; nil when there are none. Keys are read
// in sorted order, so that the first bad one is always the same.
func ReadLoadParams(params map[string]Param, rules ParamRules) (*core.LoadOverride, error) {
	var ov *core.LoadOverride
	for _, k := range slices.Sorted(maps.Keys(params)) {
		p := params[k]
		if ov == nil {
			ov = &core.LoadOverride{}
		}
		switch {
		case k == "config":
			if p.Kind != ParamString {
				return nil, invalidArg("invalid value type for load parameter 'config', expected string_param.")
			}
			ov.ConfigJSON = p.String
		case strings.HasPrefix(k, "file:"):
			data, err := loadFile(k, p, rules)
			if err != nil {
				return nil, err
			}
			if ov.Files == nil {
				ov.Files = map[string][]byte{}
			}
			ov.Files[strings.TrimPrefix(k, "file:")] = data
		case rules == HTTPRules:
			return nil, core.Errorf(core.CodeInternal, "unexpected error on creating Triton parameter")
		default:
			return nil, invalidArg("unrecognized load parameter '" + k + "'.")
		}
	}
	return ov, nil
}

// loadFile is the content of load parameter k: HTTP's base64 text (its
// body's reader admits strings only), gRPC's bytes.
func loadFile(k string, p Param, rules ParamRules) ([]byte, error) {
	if rules == HTTPRules {
		return LenientBase64(p.String), nil
	}
	if p.Kind != ParamBytes {
		return nil, invalidArg("invalid value type for load parameter '" + k + "', expected bytes_param.")
	}
	return p.Bytes, nil
}

// ReadUnloadParams reads unload parameters by a transport's rules
// (HTTPRules or GRPCRules): "unload_dependents" is a bool, which gRPC
// requires and HTTP ignores otherwise; other keys are ignored.
func ReadUnloadParams(params map[string]Param, rules ParamRules) (dependents bool, err error) {
	p, ok := params["unload_dependents"]
	switch {
	case !ok:
		return false, nil
	case p.Kind == ParamBool:
		return p.Bool, nil
	case rules == HTTPRules:
		return false, nil
	}
	return false, wrongType("unload_dependents", "bool_param")
}

// LenientBase64 decodes base64 text like Triton's decoder: characters outside the
// alphabet are skipped, never an error.
func LenientBase64(s string) []byte {
	var vals []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= 'A' && c <= 'Z':
			v = c - 'A'
		case c >= 'a' && c <= 'z':
			v = c - 'a' + 26
		case c >= '0' && c <= '9':
			v = c - '0' + 52
		case c == '+' || c == '-':
			v = 62
		case c == '/' || c == '_':
			v = 63
		default:
			continue
		}
		vals = append(vals, v)
	}
	out := make([]byte, 0, len(vals)*3/4)
	for i := 0; i+1 < len(vals); i += 4 {
		n := uint32(vals[i])<<18 | uint32(vals[i+1])<<12
		out = append(out, byte(n>>16))
		if i+2 < len(vals) {
			n |= uint32(vals[i+2]) << 6
			out = append(out, byte(n>>8))
		}
		if i+3 < len(vals) {
			n |= uint32(vals[i+3])
			out = append(out, byte(n))
		}
	}
	return out
}
