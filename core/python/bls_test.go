package python_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
)

// TestBLSCorrelationID: a BLS call's correlation id reaches the called
// model exactly, up to 2^64-1 (ids above 2^53 changed on their way through
// a float64), a string id stays a string, and a bool is the int it is in
// Python (Triton's stub casts any Python int to uint64).
func TestBLSCorrelationID(t *testing.T) {
	e := start(t, options{}, "bls_corr", "corr_echo")
	for _, c := range []struct{ corr, want string }{
		{"9223372036854775807", "int:9223372036854775807"},
		{"18446744073709551615", "int:18446744073709551615"},
		{"9007199254740993", "int:9007199254740993"},
		{"0", "int:0"},
		{"seq-a", "str:seq-a"},
		{"True", "int:1"},
	} {
		resp, err := e.infer(&core.InferRequest{ModelName: "bls_corr", Inputs: []*core.Tensor{bytesTensor("CORR", c.corr)}})
		if err != nil {
			t.Fatalf("correlation id %s: %v", c.corr, err)
		}
		if got := strings1(t, output(resp, "SEEN"))[0]; got != c.want {
			t.Errorf("correlation id %s: the called model saw %s, want %s", c.corr, got, c.want)
		}
	}
	for _, corr := range []string{"-1", "18446744073709551616"} {
		_, err := e.infer(&core.InferRequest{ModelName: "bls_corr", Inputs: []*core.Tensor{bytesTensor("CORR", corr)}})
		if err == nil || !strings.Contains(err.Error(), "correlation") {
			t.Errorf("correlation id %s: %v, want an error about the id", corr, err)
		}
	}
}

// TestBLSCancelAfterRestart: a restarted worker numbers its BLS calls from
// 1 again; cancelling its stream cancels that stream, whatever the dead
// worker's call of the same number does (which ends with its worker).
func TestBLSCancelAfterRestart(t *testing.T) {
	e := start(t, options{}, "bls_restart", "repeat")
	mode := func(m int32) (*core.InferResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req := int32Request("bls_restart", m)
		req.Inputs[0].Name = "MODE"
		return e.srv.Infer(ctx, req)
	}
	if _, err := mode(0); err == nil {
		t.Fatal("MODE 0 answered; its worker should have died")
	}
	for deadline := time.Now().Add(60 * time.Second); !e.srv.ModelReady("bls_restart", core.LatestVersion); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker was not restarted")
		}
	}
	resp, err := mode(1)
	if err != nil {
		t.Fatalf("the cancelled stream did not end: %v", err)
	}
	if n := int64(binary.LittleEndian.Uint64(output(resp, "COUNT").Data)); n <= 0 || n >= 100000 {
		t.Fatalf("%d responses, want the stream cut short by its cancel", n)
	}
}

// TestBLSErrorCodes: an error a BLS call's model answered with reaches the
// caller with its code (triton-inference-server/python_backend
// src/request_executor.cc keeps the response error's code); an error that
// refused the request before it ran comes as INTERNAL, prefixed with
// "Model <name> - Error when running inference: ", as Triton's
// RequestExecutor::Infer words a failed TRITONSERVER_ServerInferAsync.
func TestBLSErrorCodes(t *testing.T) {
	e := start(t, options{}, "bls_error", "error_code")
	for _, c := range []struct {
		code string
		want core.Code
	}{
		{"INVALID_ARG", core.CodeInvalidArg},
		{"NOT_FOUND", core.CodeNotFound},
		{"UNAVAILABLE", core.CodeUnavailable},
		{"INTERNAL", core.CodeInternal},
	} {
		_, err := e.infer(&core.InferRequest{ModelName: "bls_error", Inputs: []*core.Tensor{bytesTensor("CODE", c.code)}})
		if core.CodeOf(err) != c.want || err.Error() != "error code: "+c.code {
			t.Errorf("error_code %s through BLS: %v (code %v), want %q with code %v", c.code, err, core.CodeOf(err), "error code: "+c.code, c.want)
		}
	}
}
