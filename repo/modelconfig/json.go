package modelconfig

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MarshalJSON renders cfg as the body of the model-configuration endpoint
// (GET /v2/models/{m}/config), matching Triton's ModelConfigToJson:
// compact, proto field names in schema declaration order, every scalar,
// list and map printed even when empty or zero, unset messages omitted,
// enums by name, and a fixed set of 64-bit integer fields turned back from
// protobuf-JSON strings into JSON numbers (see fixInt64Fields).
//
// An entirely empty configuration renders as an empty body, as Triton's
// does; a normalised configuration is never empty.
func MarshalJSON(cfg *ModelConfig) ([]byte, error) {
	if cfg == nil || proto.Size(cfg) == 0 {
		return []byte{}, nil
	}
	// EmitDefaultValues, not EmitUnpopulated: the latter prints null for
	// every unset message field, which Triton never does.
	raw, err := protojson.MarshalOptions{
		UseProtoNames:     true,
		EmitDefaultValues: true,
	}.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshal model config %q to JSON: %w", cfg.GetName(), err)
	}
	// protojson randomly varies its white space to stop callers depending
	// on it, so the output is re-emitted from a parsed tree, compact.
	tree, err := parseJSONTree(raw)
	if err != nil {
		return nil, fmt.Errorf("re-read model config %q JSON: %w", cfg.GetName(), err)
	}
	fixInt64Fields(tree)
	var buf bytes.Buffer
	buf.Grow(len(raw))
	tree.writeCompact(&buf)
	return buf.Bytes(), nil
}

// fixInt64Fields converts exactly the 64-bit fields Triton converts. The
// list deliberately has holes that mirror Triton's: state initial_state
// dims (Triton looks for initial_state on the wrong object), CUDA graph
// shape dims, secondary device ids and priority_queue_policy keys (JSON
// keys are always strings) stay strings.
func fixInt64Fields(root *jsonValue) {
	for _, name := range []string{"input", "output"} {
		for _, io := range items(root.field(name)) {
			fixIntArray(io.field("dims"))
			fixIntArray(io.field("reshape").field("shape"))
		}
	}

	fixIntArray(root.field("version_policy").field("specific").field("versions"))

	if db := root.field("dynamic_batching"); db != nil {
		db.field("max_queue_delay_microseconds").unquoteInteger()
		db.field("priority_levels").unquoteInteger()
		db.field("default_priority_level").unquoteInteger()
		db.field("default_queue_policy").field("default_timeout_microseconds").unquoteInteger()
		if pqp := db.field("priority_queue_policy"); pqp != nil && pqp.kind == jsonObject {
			for _, m := range pqp.members {
				m.value.field("default_timeout_microseconds").unquoteInteger()
			}
		}
	}

	if sb := root.field("sequence_batching"); sb != nil {
		sb.field("max_sequence_idle_microseconds").unquoteInteger()
		sb.field("oldest").field("max_queue_delay_microseconds").unquoteInteger()
		sb.field("direct").field("max_queue_delay_microseconds").unquoteInteger()
		for _, state := range items(sb.field("state")) {
			fixIntArray(state.field("dims"))
		}
	}

	for _, step := range items(root.field("ensemble_scheduling").field("step")) {
		step.field("model_version").unquoteInteger()
	}

	for _, warmup := range items(root.field("model_warmup")) {
		if inputs := warmup.field("inputs"); inputs != nil && inputs.kind == jsonObject {
			for _, m := range inputs.members {
				fixIntArray(m.value.field("dims"))
			}
		}
	}
}

func fixIntArray(arr *jsonValue) {
	for _, item := range items(arr) {
		item.unquoteInteger()
	}
}

// items returns the elements of an array value, or nil for anything else.
func items(v *jsonValue) []*jsonValue {
	if v == nil || v.kind != jsonArray {
		return nil
	}
	return v.items
}
