package v2_test

import (
	"reflect"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	v2 "github.com/inferd/inferd/platforms/v2"
)

func i64(v int64) v2.Param   { return v2.Param{Kind: v2.ParamInt64, Int64: v} }
func u64(v uint64) v2.Param  { return v2.Param{Kind: v2.ParamUint64, Uint64: v} }
func str(v string) v2.Param  { return v2.Param{Kind: v2.ParamString, String: v} }
func boolp(v bool) v2.Param  { return v2.Param{Kind: v2.ParamBool, Bool: v} }
func byts(v []byte) v2.Param { return v2.Param{Kind: v2.ParamBytes, Bytes: v} }

// wantInvalid reports whether the case expects an error (msg is not ""),
// failing t unless err is then INVALID_ARG with the text msg.
func wantInvalid(t *testing.T, err error, msg string) bool {
	t.Helper()
	if msg == "" {
		return false
	}
	if err == nil || v2.ClassOf(err) != core.CodeInvalidArg || err.Error() != msg {
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

// TestReadInferParams: the request-level parameter rules of gRPC's
// ModelInfer (triton-inference-server/server src/grpc/infer_handler.cc).
func TestReadInferParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]v2.Param
		want   *v2.InferParams
		msg    string
	}{
		{"none", nil, &v2.InferParams{}, ""},
		{"sequence by number", map[string]v2.Param{"sequence_id": i64(5), "sequence_start": boolp(true), "sequence_end": boolp(false)},
			&v2.InferParams{Sequence: codec.Sequence{ID: 5, Start: true}}, ""},
		{"sequence by string", map[string]v2.Param{"sequence_id": str("s")}, &v2.InferParams{Sequence: codec.Sequence{StringID: "s", IsString: true}}, ""},
		{"scheduler", map[string]v2.Param{"priority": u64(1), "timeout": i64(100)}, &v2.InferParams{Priority: 1, TimeoutMicros: 100}, ""},
		{"priority int64", map[string]v2.Param{"priority": i64(3)}, &v2.InferParams{Priority: 3}, ""},
		{"empty final response", map[string]v2.Param{"triton_enable_empty_final_response": boolp(true)}, &v2.InferParams{EmptyFinalResponse: true}, ""},
		{"model parameters", map[string]v2.Param{"k": i64(1), "b": boolp(true), "s": str("x"), "d": {Kind: v2.ParamDouble, Double: 0.5}, "binary_data_output": boolp(true)},
			&v2.InferParams{Parameters: map[string]any{"k": int64(1), "b": true, "s": "x", "d": 0.5, "binary_data_output": true}}, ""},
		{"negative priority", map[string]v2.Param{"priority": i64(-1)}, nil, "invalid value for 'priority', expected value >= 0."},
		{"priority type", map[string]v2.Param{"priority": str("1")}, nil, "invalid value type for 'priority' parameter, expected int64_param or uint64_param."},
		{"sequence_id type", map[string]v2.Param{"sequence_id": boolp(true)}, nil, "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."},
		{"sequence_start type", map[string]v2.Param{"sequence_start": i64(1)}, nil, "invalid value type for 'sequence_start' parameter, expected bool_param."},
		{"sequence_end type", map[string]v2.Param{"sequence_end": i64(1)}, nil, "invalid value type for 'sequence_end' parameter, expected bool_param."},
		{"timeout type", map[string]v2.Param{"timeout": u64(1)}, nil, "invalid value type for 'timeout' parameter, expected int64_param."},
		{"empty final response type", map[string]v2.Param{"triton_enable_empty_final_response": i64(1)}, nil,
			"invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param."},
		{"reserved", map[string]v2.Param{"triton_foo": i64(1)}, nil,
			"parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response"},
		{"custom uint64", map[string]v2.Param{"k": u64(1)}, nil, "invalid value type for 'k' parameter, expected int64_param, bool_param, or string_param."},
		{"custom unset", map[string]v2.Param{"k": {}}, nil, "invalid value type for 'k' parameter, expected int64_param, bool_param, or string_param."},
		{"first bad key in sorted order", map[string]v2.Param{"b": u64(1), "a": u64(1)}, nil, "invalid value type for 'a' parameter, expected int64_param, bool_param, or string_param."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v2.ReadInferParams(tc.params)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
	p, _ := v2.ReadInferParams(map[string]v2.Param{"priority": i64(2), "timeout": i64(7), "k": str("v")})
	var req core.InferRequest
	p.Apply(&req)
	if req.Priority != 2 || req.TimeoutMicros != 7 || req.Parameters["k"] != "v" {
		t.Fatalf("applied %+v", req)
	}
}

func TestClassCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    v2.Param
		want uint64
		msg  string
	}{
		{"two", i64(2), 2, ""},
		{"zero", i64(0), 0, "invalid value for 'classification' parameter, expected >= 0"},
		{"negative", i64(-1), 0, "invalid value for 'classification' parameter, expected >= 0"},
		{"type", u64(2), 0, "invalid value type for 'classification' parameter, expected int64_param"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v2.ClassCount(tc.p)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
}

// TestReadLoadParams: the load and unload parameter rules of gRPC's
// RepositoryModelLoad/Unload (triton-inference-server/server src/grpc/grpc_server.cc).
func TestReadLoadParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]v2.Param
		want   *core.LoadOverride
		msg    string
	}{
		{"none", nil, nil, ""},
		{"config and raw file", map[string]v2.Param{"config": str("{}"), "file:1/model.onnx": byts([]byte{0, 1})},
			&core.LoadOverride{ConfigJSON: "{}", Files: map[string][]byte{"1/model.onnx": {0, 1}}}, ""},
		{"config as bytes", map[string]v2.Param{"config": byts([]byte("{}"))}, nil, "invalid value type for load parameter 'config', expected string_param."},
		{"file as string", map[string]v2.Param{"file:1/model.onnx": str("AAE=")}, nil, "invalid value type for load parameter 'file:1/model.onnx', expected bytes_param."},
		{"unknown key", map[string]v2.Param{"foo": str("x")}, nil, "unrecognized load parameter 'foo'."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v2.ReadLoadParams(tc.params)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
	for _, tc := range []struct {
		name   string
		params map[string]v2.Param
		want   bool
		msg    string
	}{
		{"none", nil, false, ""},
		{"true", map[string]v2.Param{"unload_dependents": boolp(true), "other": u64(1)}, true, ""},
		{"string", map[string]v2.Param{"unload_dependents": str("true")}, false, "invalid value type for 'unload_dependents' parameter, expected bool_param."},
	} {
		t.Run("unload/"+tc.name, func(t *testing.T) {
			got, err := v2.ReadUnloadParams(tc.params)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
}
