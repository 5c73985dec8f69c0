package v2_test

import (
	"testing"

	v2 "github.com/inferd/inferd/platforms/v2"
)

// TestParseRestrictionWording: the same rules, worded per transport
// ("restricted api" for --http-restricted-api, "restricted protocol" for
// --grpc-restricted-protocol: triton-inference-server/server src/command_line_parser.cc).
func TestParseRestrictionWording(t *testing.T) {
	for _, noun := range []string{"api", "protocol"} {
		dst := map[string]v2.Restriction{}
		if err := v2.ParseRestriction(dst, "health,inference:k=v", noun); err != nil {
			t.Fatal(err)
		}
		if dst["health"] != (v2.Restriction{Key: "k", Value: "v"}) || dst["inference"].Key != "k" {
			t.Fatalf("%s: %+v", noun, dst)
		}
		for arg, want := range map[string]string{
			"model-reposit:k=v": "unknown restricted " + noun + " 'model-reposit'",
			"health:x=y":        "restricted " + noun + " 'health' can not be specified in multiple config groups",
		} {
			err := v2.ParseRestriction(dst, arg, noun)
			if err == nil || err.Error() != want {
				t.Errorf("%s %q: %v, want %q", noun, arg, err, want)
			}
		}
		for _, bad := range []string{"health", "health:k", "health:=v"} {
			if err := v2.ParseRestriction(map[string]v2.Restriction{}, bad, noun); err == nil {
				t.Errorf("%s %q accepted", noun, bad)
			}
		}
	}
}
