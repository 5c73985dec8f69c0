package protocol

import (
	"fmt"
	"strings"
)

// Restriction is one restricted-category group's header (HTTP) or
// metadata key (gRPC) and the value it must carry.
type Restriction struct{ Key, Value string }

// RestrictedCategories are the categories --http-restricted-api and
// --grpc-restricted-protocol accept (triton-inference-server/server src/restricted_features.h;
// docs/customization_guide/inference_protocols.md).
var RestrictedCategories = []string{"health", "metadata", "inference", "shared-memory", "model-config", "model-repository", "statistics", "trace", "logging"}

// ParseRestriction reads one "<cat>[,<cat>...]:<key>=<value>" group into
// dst. noun words the errors as the transport's flag does: "api" for
// --http-restricted-api ("unknown restricted api '<cat>'"), "protocol"
// for --grpc-restricted-protocol ("unknown restricted protocol '<cat>'").
func ParseRestriction(dst map[string]Restriction, arg, noun string) error {
	cats, kv, ok := strings.Cut(arg, ":")
	key, value, ok2 := strings.Cut(kv, "=")
	if !ok || !ok2 || key == "" {
		return fmt.Errorf("restricted %s expects <category>[,<category>...]:<key>=<value>, got %q", noun, arg)
	}
	for _, c := range strings.Split(cats, ",") {
		known := false
		for _, k := range RestrictedCategories {
			known = known || k == c
		}
		if !known {
			return fmt.Errorf("unknown restricted %s '%s'", noun, c)
		}
		if _, dup := dst[c]; dup {
			return fmt.Errorf("restricted %s '%s' can not be specified in multiple config groups", noun, c)
		}
		dst[c] = Restriction{Key: key, Value: value}
	}
	return nil
}
