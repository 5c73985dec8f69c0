package python_test

import (
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

// TestBLSCorrelationID: a BLS call's correlation id reaches the called
// model exactly, up to 2^64-1 (ids above 2^53 changed on their way through
// a float64), and a string id stays a string.
func TestBLSCorrelationID(t *testing.T) {
	e := start(t, options{}, "bls_corr", "corr_echo")
	for _, c := range []struct{ corr, want string }{
		{"9223372036854775807", "int:9223372036854775807"},
		{"18446744073709551615", "int:18446744073709551615"},
		{"9007199254740993", "int:9007199254740993"},
		{"0", "int:0"},
		{"seq-a", "str:seq-a"},
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
