package v2

import (
	"maps"
	"slices"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// ParamKind is which choice of a typed parameter is set: the oneof of
// gRPC's InferParameter and ModelRepositoryParameter.
type ParamKind int

// Parameter choices; ParamNone is a parameter with nothing set.
const (
	ParamNone ParamKind = iota
	ParamBool
	ParamInt64
	ParamString
	ParamDouble
	ParamUint64
	ParamBytes
)

// Param is one typed parameter; the field of its Kind holds the value.
type Param struct {
	Kind   ParamKind
	Bool   bool
	Int64  int64
	Uint64 uint64
	Double float64
	String string
	Bytes  []byte
}

// InferParams are a request's parameters once the v2 rules have read them.
type InferParams struct {
	Sequence      codec.Sequence
	Priority      uint64
	TimeoutMicros uint64
	// EmptyFinalResponse is triton_enable_empty_final_response (streaming).
	EmptyFinalResponse bool
	// Parameters are the ones passed to the model (string, int64, bool or
	// float64 values); nil when there are none.
	Parameters map[string]any
}

// Apply sets the scheduler parameters and the model's parameters on req.
func (p *InferParams) Apply(req *core.InferRequest) {
	req.Priority, req.TimeoutMicros, req.Parameters = p.Priority, p.TimeoutMicros, p.Parameters
	p.Sequence.Apply(req)
}

func invalidArg(msg string) error { return &core.Error{Code: core.CodeInvalidArg, Msg: msg} }

func wrongType(key, expected string) error {
	return invalidArg("invalid value type for '" + key + "' parameter, expected " + expected + ".")
}

// ReadInferParams applies the request-level parameter rules of typed
// parameters (triton-inference-server/server src/grpc/infer_handler.cc,
// SetInferenceRequestMetadata): the sequence, priority and timeout keys,
// the one allowed triton_ key, and every other key passed to the model.
// Keys are read in sorted order, so the first bad one is always the same;
// every error is INVALID_ARG.
func ReadInferParams(params map[string]Param) (*InferParams, error) {
	out := &InferParams{}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		p := params[k]
		switch {
		case k == "sequence_id":
			switch p.Kind {
			case ParamInt64:
				out.Sequence.ID, out.Sequence.StringID, out.Sequence.IsString = uint64(p.Int64), "", false
			case ParamString:
				out.Sequence.ID, out.Sequence.StringID, out.Sequence.IsString = 0, p.String, true
			default:
				return nil, wrongType(k, "int64_param or string_param")
			}
		case k == "sequence_start", k == "sequence_end", k == "triton_enable_empty_final_response":
			if p.Kind != ParamBool {
				return nil, wrongType(k, "bool_param")
			}
			switch k {
			case "sequence_start":
				out.Sequence.Start = p.Bool
			case "sequence_end":
				out.Sequence.End = p.Bool
			default:
				out.EmptyFinalResponse = p.Bool
			}
		case k == "priority":
			switch {
			case p.Kind == ParamInt64 && p.Int64 < 0:
				return nil, invalidArg("invalid value for 'priority', expected value >= 0.")
			case p.Kind == ParamInt64:
				out.Priority = uint64(p.Int64)
			case p.Kind == ParamUint64:
				out.Priority = p.Uint64
			default:
				return nil, wrongType(k, "int64_param or uint64_param")
			}
		case k == "timeout":
			if p.Kind != ParamInt64 {
				return nil, wrongType(k, "int64_param")
			}
			out.TimeoutMicros = uint64(p.Int64)
		case strings.HasPrefix(k, "triton_"):
			return nil, invalidArg("parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response")
		default:
			var v any
			switch p.Kind {
			case ParamInt64:
				v = p.Int64
			case ParamBool:
				v = p.Bool
			case ParamString:
				v = p.String
			case ParamDouble:
				v = p.Double
			default:
				return nil, wrongType(k, "int64_param, bool_param, or string_param")
			}
			if out.Parameters == nil {
				out.Parameters = map[string]any{}
			}
			out.Parameters[k] = v
		}
	}
	return out, nil
}

// ClassCount reads an output's "classification" parameter
// (triton-inference-server/server src/grpc/grpc_utils.cc,
// ParseClassificationParams): an int64 greater than zero.
func ClassCount(p Param) (uint64, error) {
	if p.Kind != ParamInt64 {
		return 0, invalidArg("invalid value type for 'classification' parameter, expected int64_param")
	}
	if p.Int64 <= 0 {
		return 0, invalidArg("invalid value for 'classification' parameter, expected >= 0")
	}
	return uint64(p.Int64), nil
}

// ReadLoadParams reads typed load parameters as gRPC's RepositoryModelLoad does
// (triton-inference-server/server src/grpc/grpc_server.cc): "config"
// a string (a ModelConfig's JSON text), "file:<path>" the raw bytes of a
// file; nil when there are none. Keys are read in sorted order.
func ReadLoadParams(params map[string]Param) (*core.LoadOverride, error) {
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
			if p.Kind != ParamBytes {
				return nil, invalidArg("invalid value type for load parameter '" + k + "', expected bytes_param.")
			}
			if ov.Files == nil {
				ov.Files = map[string][]byte{}
			}
			ov.Files[strings.TrimPrefix(k, "file:")] = p.Bytes
		default:
			return nil, invalidArg("unrecognized load parameter '" + k + "'.")
		}
	}
	return ov, nil
}

// ReadUnloadParams reads typed unload parameters as gRPC's RepositoryModelUnload
// does (triton-inference-server/server src/grpc/grpc_server.cc):
// "unload_dependents" must be a bool; other keys are ignored.
func ReadUnloadParams(params map[string]Param) (dependents bool, err error) {
	p, ok := params["unload_dependents"]
	if !ok {
		return false, nil
	}
	if p.Kind != ParamBool {
		return false, wrongType("unload_dependents", "bool_param")
	}
	return p.Bool, nil
}
