package modelconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ParseJSON decodes a configuration given as protobuf JSON, as in the
// "config" parameter of the repository load API. Like Triton's
// JsonStringToMessage call it rejects unknown fields, accepts proto or
// lowerCamel field names, 64-bit integers as JSON numbers or strings, and
// enum names in any letter case.
func ParseJSON(data []byte) (*ModelConfig, error) {
	cfg := &ModelConfig{}
	err := protojson.UnmarshalOptions{}.Unmarshal(data, cfg)
	if err == nil {
		return cfg, nil
	}
	// protojson has no case-insensitive enum option; retry once with enum
	// names canonicalised, and report the original error if that fails.
	if fixed, ok := canonicalizeEnumCase(data, cfg.ProtoReflect().Descriptor()); ok {
		retry := &ModelConfig{}
		if protojson.Unmarshal(fixed, retry) == nil {
			return retry, nil
		}
	}
	return nil, fmt.Errorf("parse model config JSON: %w", err)
}

// canonicalizeEnumCase rewrites enum-valued strings in a JSON document of
// message md to the exact case of the enum value they match
// case-insensitively. ok is false when nothing changed or the document
// cannot be decoded.
func canonicalizeEnumCase(data []byte, md protoreflect.MessageDescriptor) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep 64-bit integers exact
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	if !fixMessageEnums(doc, md) {
		return nil, false
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return out, true
}

func fixMessageEnums(v any, md protoreflect.MessageDescriptor) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for key, val := range obj {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		if fd == nil {
			continue
		}
		switch {
		case fd.IsMap():
			m, ok := val.(map[string]any)
			if !ok {
				continue
			}
			for k, mv := range m {
				if nv, c := fixFieldValue(mv, fd.MapValue()); c {
					m[k] = nv
					changed = true
				}
			}
		case fd.IsList():
			list, ok := val.([]any)
			if !ok {
				continue
			}
			for i, item := range list {
				if nv, c := fixFieldValue(item, fd); c {
					list[i] = nv
					changed = true
				}
			}
		default:
			if nv, c := fixFieldValue(val, fd); c {
				obj[key] = nv
				changed = true
			}
		}
	}
	return changed
}

// fixFieldValue handles one (non-repeated) value of field fd.
func fixFieldValue(v any, fd protoreflect.FieldDescriptor) (any, bool) {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		s, ok := v.(string)
		if !ok {
			return v, false
		}
		values := fd.Enum().Values()
		if values.ByName(protoreflect.Name(s)) != nil {
			return v, false
		}
		for i := 0; i < values.Len(); i++ {
			if name := string(values.Get(i).Name()); strings.EqualFold(name, s) {
				return name, true
			}
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return v, fixMessageEnums(v, fd.Message())
	}
	return v, false
}
