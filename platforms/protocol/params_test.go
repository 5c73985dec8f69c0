package protocol_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
)

func i64(v int64) protocol.Param   { return protocol.Param{Kind: protocol.ParamInt64, Int64: v} }
func u64(v uint64) protocol.Param  { return protocol.Param{Kind: protocol.ParamUint64, Uint64: v} }
func str(v string) protocol.Param  { return protocol.Param{Kind: protocol.ParamString, String: v} }
func boolp(v bool) protocol.Param  { return protocol.Param{Kind: protocol.ParamBool, Bool: v} }
func byts(v []byte) protocol.Param { return protocol.Param{Kind: protocol.ParamBytes, Bytes: v} }

// wantInvalid reports whether the case expects an error (msg is not ""),
// failing t unless err is then INVALID_ARG with the text msg.
func wantInvalid(t *testing.T, err error, msg string) bool {
	t.Helper()
	if msg == "" {
		return false
	}
	if err == nil || protocol.ClassOf(err) != core.CodeInvalidArg || err.Error() != msg {
		t.Fatalf("got %v, want INVALID_ARG %q", err, msg)
	}
	return true
}

// checkResult fails t unless a call answered want, or the INVALID_ARG
// error msg when msg is not "".
func checkResult[T any](t *testing.T, got T, err error, want T, msg string) {
	t.Helper()
	if !wantInvalid(t, err, msg) && (err != nil || !reflect.DeepEqual(got, want)) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func dbl(v float64) protocol.Param { return protocol.Param{Kind: protocol.ParamDouble, Double: v} }

// kv is one parameter as a transport hands it to the reader.
type kv struct {
	key string
	p   protocol.Param
}

// paramResult is what a ParamReader leaves: the request's scheduling
// fields and model parameters, and the stream's empty final response.
type paramResult struct {
	Correlation   core.Correlation
	Priority      uint64
	TimeoutMicros uint64
	Parameters    map[string]any
	EmptyFinal    bool
}

// TestParamReader: each transport's request-parameter rules, read one key
// at a time: gRPC's (triton-inference-server/server src/grpc/infer_handler.cc),
// HTTP infer's (src/http_server.cc, ParseJsonTritonParams) and the
// generate extension's.
func TestParamReader(t *testing.T) {
	const (
		g   = protocol.GRPCRules
		h   = protocol.HTTPRules
		gen = protocol.GenerateRules
	)
	start, end := core.FlagSequenceStart, core.FlagSequenceEnd
	for _, tc := range []struct {
		name   string
		rules  protocol.ParamRules
		params []kv
		want   paramResult
		code   core.Code // of the error msg, when msg is set
		msg    string
	}{
		{name: "none", rules: g},
		{name: "grpc sequence by number", rules: g, params: []kv{{"sequence_id", i64(5)}, {"sequence_start", boolp(true)}, {"sequence_end", boolp(false)}},
			want: paramResult{Correlation: core.Correlation{ID: 5, Flags: start}}},
		{name: "grpc negative sequence id as is", rules: g, params: []kv{{"sequence_id", i64(-1)}}, want: paramResult{Correlation: core.Correlation{ID: math.MaxUint64}}},
		{name: "grpc sequence by string", rules: g, params: []kv{{"sequence_id", str("s")}, {"sequence_end", boolp(true)}},
			want: paramResult{Correlation: core.Correlation{StringID: "s", IsString: true, Flags: end}}},
		{name: "grpc scheduler", rules: g, params: []kv{{"priority", u64(1)}, {"timeout", i64(100)}}, want: paramResult{Priority: 1, TimeoutMicros: 100}},
		{name: "grpc priority int64", rules: g, params: []kv{{"priority", i64(3)}}, want: paramResult{Priority: 3}},
		{name: "grpc negative timeout as is", rules: g, params: []kv{{"timeout", i64(-1)}}, want: paramResult{TimeoutMicros: math.MaxUint64}},
		{name: "grpc empty final response", rules: g, params: []kv{{"triton_enable_empty_final_response", boolp(true)}}, want: paramResult{EmptyFinal: true}},
		{name: "grpc model parameters", rules: g, params: []kv{{"b", boolp(true)}, {"binary_data_output", boolp(true)}, {"d", dbl(0.5)}, {"k", i64(1)}, {"s", str("x")}},
			want: paramResult{Parameters: map[string]any{"k": int64(1), "b": true, "s": "x", "d": 0.5, "binary_data_output": true}}},
		{name: "grpc negative priority", rules: g, params: []kv{{"priority", i64(-1)}}, code: core.CodeInvalidArg, msg: "invalid value for 'priority', expected value >= 0."},
		{name: "grpc priority type", rules: g, params: []kv{{"priority", str("1")}}, code: core.CodeInvalidArg, msg: "invalid value type for 'priority' parameter, expected int64_param or uint64_param."},
		{name: "grpc sequence_id type", rules: g, params: []kv{{"sequence_id", boolp(true)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."},
		{name: "grpc sequence_id uint64", rules: g, params: []kv{{"sequence_id", u64(1)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."},
		{name: "grpc sequence_start type", rules: g, params: []kv{{"sequence_start", i64(1)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'sequence_start' parameter, expected bool_param."},
		{name: "grpc sequence_end type", rules: g, params: []kv{{"sequence_end", i64(1)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'sequence_end' parameter, expected bool_param."},
		{name: "grpc timeout type", rules: g, params: []kv{{"timeout", u64(1)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'timeout' parameter, expected int64_param."},
		{name: "grpc empty final response type", rules: g, params: []kv{{"triton_enable_empty_final_response", i64(1)}}, code: core.CodeInvalidArg,
			msg: "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param."},
		{name: "grpc reserved", rules: g, params: []kv{{"triton_foo", i64(1)}}, code: core.CodeInvalidArg,
			msg: "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response"},
		{name: "grpc string sequence id of 128 bytes", rules: g, params: []kv{{"sequence_id", str(strings.Repeat("s", 128))}},
			want: paramResult{Correlation: core.Correlation{StringID: strings.Repeat("s", 128), IsString: true}}},
		{name: "grpc string sequence id over 128 bytes", rules: g, params: []kv{{"sequence_id", str(strings.Repeat("s", 129))}}, code: core.CodeUnsupported,
			msg: "string correlation ID cannot be longer than 128 characters"},
		{name: "grpc strings cut at a NUL", rules: g, params: []kv{{"sequence_id", str(strings.Repeat("s", 128) + "\x00more")}, {"k", str("x\x00y")}},
			want: paramResult{Correlation: core.Correlation{StringID: strings.Repeat("s", 128), IsString: true}, Parameters: map[string]any{"k": "x"}}},
		{name: "grpc custom uint64", rules: g, params: []kv{{"k", u64(1)}}, code: core.CodeInvalidArg, msg: "invalid value type for 'k' parameter, expected int64_param, bool_param, or string_param."},
		{name: "grpc custom unset", rules: g, params: []kv{{"k", protocol.Param{}}}, code: core.CodeInvalidArg, msg: "invalid value type for 'k' parameter, expected int64_param, bool_param, or string_param."},

		{name: "http sequence", rules: h, params: []kv{{"sequence_id", u64(math.MaxUint64)}, {"sequence_start", boolp(true)}, {"sequence_end", boolp(true)}},
			want: paramResult{Correlation: core.Correlation{ID: math.MaxUint64, Flags: start | end}}},
		{name: "http repeated keys: the last wins", rules: h, params: []kv{{"sequence_id", str("s")}, {"sequence_start", boolp(true)}, {"sequence_id", i64(7)}, {"sequence_start", boolp(false)}, {"k", i64(1)}, {"k", str("x")}},
			want: paramResult{Correlation: core.Correlation{ID: 7}, Parameters: map[string]any{"k": "x"}}},
		{name: "http scheduler", rules: h, params: []kv{{"priority", u64(math.MaxUint64)}, {"timeout", i64(0)}}, want: paramResult{Priority: math.MaxUint64}},
		{name: "http model parameters", rules: h, params: []kv{{"big", u64(1 << 63)}, {"d", dbl(-0.5)}, {"k", i64(-1)}, {"sequence", str("not a sequence key")}},
			want: paramResult{Parameters: map[string]any{"big": float64(1 << 63), "d": -0.5, "k": int64(-1), "sequence": "not a sequence key"}}},
		{name: "http string sequence id over 128 bytes", rules: h, params: []kv{{"sequence_id", str(strings.Repeat("s", 129))}, {"k", i64(1)}}, code: core.CodeUnsupported,
			msg: "string correlation ID cannot be longer than 128 characters"},
		{name: "http negative sequence_id", rules: h, params: []kv{{"sequence_id", i64(-1)}}, code: core.CodeInternal, msg: "Unable to parse 'sequence_id': attempt to access JSON non-string as string"},
		{name: "http sequence_start type", rules: h, params: []kv{{"sequence_start", i64(1)}}, code: core.CodeInternal, msg: "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"},
		{name: "http negative priority", rules: h, params: []kv{{"priority", i64(-1)}}, code: core.CodeInternal,
			msg: "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "http timeout type", rules: h, params: []kv{{"timeout", dbl(1)}}, code: core.CodeInternal,
			msg: "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{name: "http empty final response is reserved", rules: h, params: []kv{{"triton_enable_empty_final_response", boolp(true)}}, code: core.CodeInvalidArg,
			msg: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{name: "http null", rules: h, params: []kv{{"headers", protocol.Param{}}}, code: core.CodeInvalidArg, msg: "parameter 'headers' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{name: "http stops at the first bad key", rules: h, params: []kv{{"a", i64(1)}, {"b", protocol.Param{}}, {"c", i64(3)}}, code: core.CodeInvalidArg,
			msg: "parameter 'b' has invalid type. It should be either 'int', 'bool', or 'string'."},

		{name: "generate: every key a model parameter", rules: gen,
			params: []kv{{"sequence_id", str("s")}, {"priority", i64(-1)}, {"triton_x", boolp(true)}, {"big", u64(1 << 63)}, {"binary_data_output", boolp(false)}},
			want:   paramResult{Parameters: map[string]any{"sequence_id": "s", "priority": int64(-1), "triton_x": true, "big": float64(1 << 63), "binary_data_output": false}}},
		{name: "generate invalid type", rules: gen, params: []kv{{"x", protocol.Param{}}}, code: core.CodeInvalidArg, msg: "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req core.InferRequest
			r := protocol.ParamReader{Rules: tc.rules, Request: &req}
			var err error
			for _, p := range tc.params {
				if err = r.Read(p.key, p.p); err != nil {
					break
				}
			}
			if tc.msg != "" {
				if err == nil || core.CodeOf(err) != tc.code || err.Error() != tc.msg {
					t.Fatalf("got %v (%v), want %v %q", err, core.CodeOf(err), tc.code, tc.msg)
				}
				return
			}
			got := paramResult{req.Correlation, req.Priority, req.TimeoutMicros, req.Parameters, r.EmptyFinalResponse}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestParamReaderMissing: HTTP's errors for a listed key its lookup does
// not find (a JSON name cut at a NUL).
func TestParamReaderMissing(t *testing.T) {
	r := protocol.ParamReader{Rules: protocol.HTTPRules, Request: &core.InferRequest{}}
	for _, tc := range []struct {
		key  string
		code core.Code
		msg  string
	}{
		{"sequence_id", core.CodeInternal, "Unable to parse 'sequence_id': attempt to access non-existing object member 'sequence_id'"},
		{"timeout", core.CodeInternal, "Unable to parse 'timeout': attempt to access non-existing object member 'timeout'"},
		{"triton_x", core.CodeInvalidArg, "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
		{"k", core.CodeInternal, "parameter key 'k' was not found in the JSON"},
	} {
		if err := r.Missing(tc.key); core.CodeOf(err) != tc.code || err.Error() != tc.msg {
			t.Errorf("%s: %v (%v), want %v %q", tc.key, err, core.CodeOf(err), tc.code, tc.msg)
		}
	}
}

// TestResponseParam: the one writer of response parameters takes every
// Go integer and float kind, and refuses bytes and other types with the
// errors every transport gives.
func TestResponseParam(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want protocol.Param
		code core.Code
		msg  string
	}{
		{v: true, want: boolp(true)},
		{v: "s", want: str("s")},
		{v: int(-1), want: i64(-1)},
		{v: int8(-8), want: i64(-8)},
		{v: int16(-16), want: i64(-16)},
		{v: int32(math.MinInt32), want: i64(math.MinInt32)},
		{v: int64(math.MinInt64), want: i64(math.MinInt64)},
		{v: uint(1), want: u64(1)},
		{v: uint8(255), want: u64(255)},
		{v: uint16(65535), want: u64(65535)},
		{v: uint32(math.MaxUint32), want: u64(math.MaxUint32)},
		{v: uint64(math.MaxUint64), want: u64(math.MaxUint64)},
		{v: float32(0.1), want: dbl(float64(float32(0.1)))},
		{v: 2.5, want: dbl(2.5)},
		{v: []byte("x"), code: core.CodeUnsupported, msg: "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"},
		{v: struct{}{}, code: core.CodeInternal, msg: "response parameter 'p' has unsupported type struct {}"},
	} {
		got, err := protocol.ResponseParam("p", tc.v)
		if tc.msg != "" {
			if err == nil || core.CodeOf(err) != tc.code || err.Error() != tc.msg {
				t.Errorf("%T: %v (%v), want %v %q", tc.v, err, core.CodeOf(err), tc.code, tc.msg)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%T: %+v, %v; want %+v", tc.v, got, err, tc.want)
		}
	}
}

func TestClassCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    protocol.Param
		want uint64
		msg  string
	}{
		{"two", i64(2), 2, ""},
		{"zero", i64(0), 0, "invalid value for 'classification' parameter, expected >= 0"},
		{"negative", i64(-1), 0, "invalid value for 'classification' parameter, expected >= 0"},
		{"type", u64(2), 0, "invalid value type for 'classification' parameter, expected int64_param"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.ClassCount(tc.p)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
}
