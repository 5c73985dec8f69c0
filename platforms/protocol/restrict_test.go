package protocol_test

import (
	"testing"

	"github.com/inferd/inferd/platforms/protocol"
)

// TestParseRestrictionWording: the same rules, worded per transport
// ("restricted api" for --http-restricted-api, "restricted protocol" for
// --grpc-restricted-protocol: triton-inference-server/server src/command_line_parser.cc).
func TestParseRestrictionWording(t *testing.T) {
	for _, noun := range []string{"api", "protocol"} {
		dst := map[string]protocol.Restriction{}
		if err := protocol.ParseRestriction(dst, "health,inference:k=v", noun); err != nil {
			t.Fatal(err)
		}
		if dst["health"] != (protocol.Restriction{Key: "k", Value: "v"}) || dst["inference"].Key != "k" {
			t.Fatalf("%s: %+v", noun, dst)
		}
		for arg, want := range map[string]string{
			"model-reposit:k=v": "unknown restricted " + noun + " 'model-reposit'",
			"health:x=y":        "restricted " + noun + " 'health' can not be specified in multiple config groups",
		} {
			err := protocol.ParseRestriction(dst, arg, noun)
			if err == nil || err.Error() != want {
				t.Errorf("%s %q: %v, want %q", noun, arg, err, want)
			}
		}
		for _, bad := range []string{"health", "health:k", "health:=v"} {
			if err := protocol.ParseRestriction(map[string]protocol.Restriction{}, bad, noun); err == nil {
				t.Errorf("%s %q accepted", noun, bad)
			}
		}
	}
}
