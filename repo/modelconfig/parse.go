package modelconfig

import (
	"fmt"

	"google.golang.org/protobuf/encoding/prototext"
)

// Parse decodes config.pbtxt text. Like Triton's TextFormat parser it
// rejects unknown fields, a oneof set twice and a singular field given
// twice; it accepts '#' comments, list syntax and enums by name or number.
func Parse(text []byte) (*ModelConfig, error) {
	cfg := &ModelConfig{}
	// Default options on purpose: DiscardUnknown would silently accept
	// configurations Triton refuses.
	if err := (prototext.UnmarshalOptions{}).Unmarshal(text, cfg); err != nil {
		return nil, fmt.Errorf("parse model config text: %w", err)
	}
	return cfg, nil
}
