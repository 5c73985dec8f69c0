package protocol_test

import (
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
)

// TestReadLoadParams: the load and unload parameter rules of gRPC's
// RepositoryModelLoad/Unload (triton-inference-server/server src/grpc/grpc_server.cc)
// and of HTTP's repository control (src/http_server.cc).
func TestReadLoadParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rules  protocol.ParamRules
		params map[string]protocol.Param
		want   *core.LoadOverride
		msg    string
	}{
		{"none", protocol.GRPCRules, nil, nil, ""},
		{"config and raw file", protocol.GRPCRules, map[string]protocol.Param{"config": str("{}"), "file:1/model.onnx": byts([]byte{0, 1})},
			&core.LoadOverride{ConfigJSON: "{}", Files: map[string][]byte{"1/model.onnx": {0, 1}}}, ""},
		{"config as bytes", protocol.GRPCRules, map[string]protocol.Param{"config": byts([]byte("{}"))}, nil, "invalid value type for load parameter 'config', expected string_param."},
		{"file as string", protocol.GRPCRules, map[string]protocol.Param{"file:1/model.onnx": str("AAE=")}, nil, "invalid value type for load parameter 'file:1/model.onnx', expected bytes_param."},
		{"unknown key", protocol.GRPCRules, map[string]protocol.Param{"foo": str("x")}, nil, "unrecognized load parameter 'foo'."},
		{"http none", protocol.HTTPRules, map[string]protocol.Param{}, nil, ""},
		{"http config and base64 file", protocol.HTTPRules, map[string]protocol.Param{"config": str("{}"), "file:1/model.onnx": str("AA E=")},
			&core.LoadOverride{ConfigJSON: "{}", Files: map[string][]byte{"1/model.onnx": {0, 1}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.ReadLoadParams(tc.params, tc.rules)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
	// HTTP's unknown key is INTERNAL, not INVALID_ARG.
	if _, err := protocol.ReadLoadParams(map[string]protocol.Param{"config": str("{}"), "foo": str("x")}, protocol.HTTPRules); core.CodeOf(err) != core.CodeInternal ||
		err.Error() != "unexpected error on creating Triton parameter" {
		t.Errorf("http unknown key: %v (%v)", err, core.CodeOf(err))
	}
	for _, tc := range []struct {
		name   string
		rules  protocol.ParamRules
		params map[string]protocol.Param
		want   bool
		msg    string
	}{
		{"none", protocol.GRPCRules, nil, false, ""},
		{"true", protocol.GRPCRules, map[string]protocol.Param{"unload_dependents": boolp(true), "other": u64(1)}, true, ""},
		{"string", protocol.GRPCRules, map[string]protocol.Param{"unload_dependents": str("true")}, false, "invalid value type for 'unload_dependents' parameter, expected bool_param."},
		{"http true", protocol.HTTPRules, map[string]protocol.Param{"unload_dependents": boolp(true)}, true, ""},
		{"http string ignored", protocol.HTTPRules, map[string]protocol.Param{"unload_dependents": str("true")}, false, ""},
	} {
		t.Run("unload/"+tc.name, func(t *testing.T) {
			got, err := protocol.ReadUnloadParams(tc.params, tc.rules)
			checkResult(t, got, err, tc.want, tc.msg)
		})
	}
}
