package protocol

import (
	"strings"

	"github.com/inferd/inferd/core"
)

// ParamKind is which choice of a typed parameter is set: the oneof of
// gRPC's InferParameter and ModelRepositoryParameter, which HTTP's JSON
// values are converted to as well.
type ParamKind int

// Parameter choices; ParamNone is a parameter with nothing set (or a JSON
// value of no parameter type: null, an array, an object).
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

func invalidArg(msg string) error { return &core.Error{Code: core.CodeInvalidArg, Msg: msg} }

func wrongType(key, expected string) error {
	return invalidArg("invalid value type for '" + key + "' parameter, expected " + expected + ".")
}

// ParamRules are one transport's rules for request parameters. Triton's
// frontends read them with separate code whose differences clients can
// see, so ParamReader keeps each transport's rules, side by side:
//
//	key                  GRPCRules               HTTPRules               GenerateRules
//	sequence_id          int64 (any sign),       unsigned integer,       model parameter
//	                     or string               or string
//	sequence_start/_end  bool                    bool                    model parameter
//	priority             int64 >= 0 or uint64    unsigned integer        model parameter
//	timeout              int64                   unsigned integer        model parameter
//	triton_enable_empty_final_response:
//	                     bool (the stream's      reserved                model parameter
//	                     empty final response)
//	other triton_ keys   reserved                reserved                model parameter
//	any other key        int64, bool, string     int64, bool, string     as HTTPRules
//	                     or double               or double (an integer
//	                                             beyond int64 too)
//
// A value of the wrong type is INVALID_ARG for gRPC ("invalid value type
// for ..."); for HTTP it is the INTERNAL type error of Triton's JSON layer
// for the scheduling keys and INVALID_ARG for the others, and the two
// reserved-key texts differ. For both, a string value ends at its first
// NUL and a string sequence_id longer than 128 bytes is UNSUPPORTED. The
// order of the keys is the transport's: gRPC reads them sorted, so the
// first bad key is always the same; HTTP in document order, a repeated
// key again.
type ParamRules uint8

const (
	// GRPCRules are ModelInfer's and ModelStreamInfer's
	// (triton-inference-server/server src/grpc/infer_handler.cc,
	// SetInferenceRequestMetadata).
	GRPCRules ParamRules = iota
	// HTTPRules are those of an HTTP infer request's "parameters"
	// (triton-inference-server/server src/http_server.cc,
	// ParseJsonTritonParams). binary_data_output is HTTP's alone and read
	// by its decoder, not here.
	HTTPRules
	// GenerateRules are the generate extension's
	// (triton-inference-server/server docs/protocol/extension_generate.md):
	// every key is a parameter for the model.
	GenerateRules
)

// The type errors of Triton's JSON layer that HTTPRules report
// (triton-inference-server/common include/triton/common/triton_json.h).
const (
	jsonNonString = "attempt to access JSON non-string as string"
	jsonNonBool   = "attempt to access JSON non-boolean as boolean"
	jsonNonUint   = "attempt to access JSON non-unsigned-integer as unsigned-integer"
)

// maxStringCorrelationID is the longest string sequence id, in bytes
// (triton-inference-server/core src/tritonserver.cc,
// TRITONSERVER_InferenceRequestSetCorrelationIdString).
const maxStringCorrelationID = 128

var errLongCorrelationID = &core.Error{Code: core.CodeUnsupported, Msg: "string correlation ID cannot be longer than 128 characters"}

// cstring is s up to its first NUL.
func cstring(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// ParamReader is the one reader of request parameters: each transport
// converts a value to a Param and hands it over with its key, and the
// reader applies it to Request by the transport's Rules (the scheduling
// keys to the request's correlation, priority and timeout, any other key
// to its Parameters, allocated on the first).
type ParamReader struct {
	Rules   ParamRules
	Request *core.InferRequest
	// EmptyFinalResponse is set by triton_enable_empty_final_response
	// (GRPCRules only; ModelStreamInfer takes it).
	EmptyFinalResponse bool
}

// Read applies one parameter.
func (r *ParamReader) Read(key string, p Param) error {
	if r.Rules == GenerateRules {
		return r.modelParam(key, p)
	}
	if p.Kind == ParamString {
		// Triton hands string values to its core as C strings
		// (TRITONSERVER_InferenceRequestSetCorrelationIdString,
		// ...SetStringParameter), so a NUL ends them; HTTP's decoder has
		// cut them already.
		p.String = cstring(p.String)
	}
	req := r.Request
	switch key {
	case "sequence_id":
		switch {
		case p.Kind == ParamString:
			if len(p.String) > maxStringCorrelationID {
				return errLongCorrelationID
			}
			req.Correlation.ID, req.Correlation.StringID, req.Correlation.IsString = 0, p.String, true
			return nil
		case p.Kind == ParamInt64 && (r.Rules == GRPCRules || p.Int64 >= 0):
			req.Correlation.ID, req.Correlation.StringID, req.Correlation.IsString = uint64(p.Int64), "", false
			return nil
		case p.Kind == ParamUint64 && r.Rules == HTTPRules:
			req.Correlation.ID, req.Correlation.StringID, req.Correlation.IsString = p.Uint64, "", false
			return nil
		}
		// HTTP tries an unsigned integer, then a string.
		return r.typeError(key, "int64_param or string_param", jsonNonString)
	case "sequence_start", "sequence_end":
		if p.Kind != ParamBool {
			return r.typeError(key, "bool_param", jsonNonBool)
		}
		flag := core.FlagSequenceStart
		if key == "sequence_end" {
			flag = core.FlagSequenceEnd
		}
		if p.Bool {
			req.Correlation.Flags |= flag
		} else {
			req.Correlation.Flags &^= flag
		}
		return nil
	case "priority":
		if r.Rules == GRPCRules && p.Kind == ParamInt64 && p.Int64 < 0 {
			return invalidArg("invalid value for 'priority', expected value >= 0.")
		}
		u, ok := r.unsigned(p, true)
		if !ok {
			return r.typeError(key, "int64_param or uint64_param", jsonNonUint)
		}
		req.Priority = u
		return nil
	case "timeout":
		// gRPC takes an int64 only, a negative one as its two's complement.
		u, ok := r.unsigned(p, false)
		if !ok {
			return r.typeError(key, "int64_param", jsonNonUint)
		}
		req.TimeoutMicros = u
		return nil
	case "triton_enable_empty_final_response":
		if r.Rules != GRPCRules {
			break // reserved
		}
		if p.Kind != ParamBool {
			return wrongType(key, "bool_param")
		}
		r.EmptyFinalResponse = p.Bool
		return nil
	}
	if strings.HasPrefix(key, "triton_") {
		return r.reserved()
	}
	return r.modelParam(key, p)
}

// reserved is the error for a triton_ key the rules do not take.
func (r *ParamReader) reserved() error {
	if r.Rules == GRPCRules {
		return invalidArg("parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response")
	}
	return invalidArg("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.")
}

// unsigned reads an unsigned scheduling value: for HTTP a JSON integer
// that is not negative; for gRPC an int64 (taken as is), or a uint64 when
// withUint64.
func (r *ParamReader) unsigned(p Param, withUint64 bool) (uint64, bool) {
	switch {
	case p.Kind == ParamInt64 && (r.Rules == GRPCRules || p.Int64 >= 0):
		return uint64(p.Int64), true
	case p.Kind == ParamUint64 && (r.Rules == HTTPRules || withUint64):
		return p.Uint64, true
	}
	return 0, false
}

// typeError is the wrong-type error of a scheduling key: gRPC's names the
// choices expected, HTTP's is the JSON layer's INTERNAL type error.
func (r *ParamReader) typeError(key, grpcExpected, jsonMsg string) error {
	if r.Rules == GRPCRules {
		return wrongType(key, grpcExpected)
	}
	return &core.Error{Code: core.CodeInternal, Msg: "Unable to parse '" + key + "': " + jsonMsg}
}

// modelParam passes key to the model: a string, int64, bool or float64.
// HTTP's JSON integers beyond int64 pass as float64; gRPC refuses a uint64.
func (r *ParamReader) modelParam(key string, p Param) error {
	var v any
	switch p.Kind {
	case ParamString:
		v = p.String
	case ParamInt64:
		v = p.Int64
	case ParamBool:
		v = p.Bool
	case ParamDouble:
		v = p.Double
	case ParamUint64:
		if r.Rules == GRPCRules {
			return wrongType(key, "int64_param, bool_param, or string_param")
		}
		v = float64(p.Uint64)
	default:
		if r.Rules == GRPCRules {
			return wrongType(key, "int64_param, bool_param, or string_param")
		}
		return invalidArg("parameter '" + key + "' has invalid type. It should be either 'int', 'bool', or 'string'.")
	}
	if r.Request.Parameters == nil {
		r.Request.Parameters = make(map[string]any)
	}
	r.Request.Parameters[key] = v
	return nil
}

// Missing is the error of HTTPRules for a key the JSON object lists but a
// lookup by that key does not find: Triton lists member names as C
// strings, so a name holding a NUL is looked up by what precedes it
// (ParseJsonTritonParams). It is a scheduling key's JSON error for a
// missing member, the reserved-key error, or "not found".
func (r *ParamReader) Missing(key string) error {
	switch key {
	case "sequence_id", "sequence_start", "sequence_end", "priority", "timeout":
		return &core.Error{Code: core.CodeInternal, Msg: "Unable to parse '" + key + "': attempt to access non-existing object member '" + key + "'"}
	}
	if strings.HasPrefix(key, "triton_") {
		return r.reserved()
	}
	return &core.Error{Code: core.CodeInternal, Msg: "parameter key '" + key + "' was not found in the JSON"}
}

// ResponseParam is a core response parameter as the protocol carries it
// (Triton's response parameters are bool, int, string, double and bytes:
// triton-inference-server/core include/triton/core/tritonserver.h,
// TRITONSERVER_ParameterType): signed integers as ParamInt64, unsigned as
// ParamUint64, floats as ParamDouble. Every transport writes response
// parameters through it, so one core response reads alike on each: a
// []byte is Triton's unsupported BYTES parameter (CodeUnsupported), any
// other Go type CodeInternal.
func ResponseParam(name string, v any) (Param, error) {
	switch v := v.(type) {
	case bool:
		return Param{Kind: ParamBool, Bool: v}, nil
	case string:
		return Param{Kind: ParamString, String: v}, nil
	case int:
		return Param{Kind: ParamInt64, Int64: int64(v)}, nil
	case int8:
		return Param{Kind: ParamInt64, Int64: int64(v)}, nil
	case int16:
		return Param{Kind: ParamInt64, Int64: int64(v)}, nil
	case int32:
		return Param{Kind: ParamInt64, Int64: int64(v)}, nil
	case int64:
		return Param{Kind: ParamInt64, Int64: v}, nil
	case uint:
		return Param{Kind: ParamUint64, Uint64: uint64(v)}, nil
	case uint8:
		return Param{Kind: ParamUint64, Uint64: uint64(v)}, nil
	case uint16:
		return Param{Kind: ParamUint64, Uint64: uint64(v)}, nil
	case uint32:
		return Param{Kind: ParamUint64, Uint64: uint64(v)}, nil
	case uint64:
		return Param{Kind: ParamUint64, Uint64: v}, nil
	case float32:
		// Widened as Triton widens an FP32 value to double.
		return Param{Kind: ParamDouble, Double: float64(v)}, nil
	case float64:
		return Param{Kind: ParamDouble, Double: v}, nil
	case []byte:
		return Param{}, &core.Error{Code: core.CodeUnsupported, Msg: "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"}
	}
	return Param{}, core.Errorf(core.CodeInternal, "response parameter '%s' has unsupported type %T", name, v)
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
