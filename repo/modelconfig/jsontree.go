package modelconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// jsonValue is a JSON document held as a tree that keeps object key order
// and the exact bytes of every scalar. The configuration endpoint needs
// both: Triton lists keys in schema order, and rewriting a few int64
// strings must not disturb how protojson escaped everything else (a round
// trip through map[string]any would do both).
type jsonValue struct {
	kind    jsonKind
	raw     []byte       // scalars: the literal as written (strings keep their quotes)
	members []jsonMember // objects, in document order
	items   []*jsonValue // arrays
}

type jsonKind int

const (
	jsonScalar jsonKind = iota
	jsonObject
	jsonArray
)

type jsonMember struct {
	rawKey []byte // quoted, as written
	key    string // decoded, for lookups
	value  *jsonValue
}

// parseJSONTree parses one JSON value that must span all of data (apart
// from surrounding white space).
func parseJSONTree(data []byte) (*jsonValue, error) {
	p := &jsonParser{data: data}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, fmt.Errorf("json: unexpected data at offset %d", p.pos)
	}
	return v, nil
}

// maxJSONDepth bounds recursion; configurations nest less than 10 levels.
const maxJSONDepth = 1000

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (*jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("json: nesting too deep")
	}
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, errors.New("json: unexpected end of input")
	}
	switch p.data[p.pos] {
	case '{':
		return p.object(depth)
	case '[':
		return p.array(depth)
	case '"':
		raw, err := p.stringLiteral()
		if err != nil {
			return nil, err
		}
		return &jsonValue{kind: jsonScalar, raw: raw}, nil
	default:
		start := p.pos
		for p.pos < len(p.data) {
			c := p.data[p.pos]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			p.pos++
		}
		raw := p.data[start:p.pos]
		if len(raw) == 0 || !json.Valid(raw) {
			return nil, fmt.Errorf("json: invalid literal at offset %d", start)
		}
		return &jsonValue{kind: jsonScalar, raw: raw}, nil
	}
}

// stringLiteral returns the quoted string starting at p.pos, quotes
// included, leaving escapes untouched.
func (p *jsonParser) stringLiteral() ([]byte, error) {
	start := p.pos
	p.pos++ // opening quote
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case '\\':
			p.pos += 2
		case '"':
			p.pos++
			return p.data[start:p.pos], nil
		default:
			p.pos++
		}
	}
	return nil, fmt.Errorf("json: unterminated string at offset %d", start)
}

func (p *jsonParser) object(depth int) (*jsonValue, error) {
	v := &jsonValue{kind: jsonObject}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, fmt.Errorf("json: expected object key at offset %d", p.pos)
		}
		rawKey, err := p.stringLiteral()
		if err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(rawKey, &key); err != nil {
			return nil, fmt.Errorf("json: bad object key: %w", err)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, fmt.Errorf("json: expected ':' at offset %d", p.pos)
		}
		p.pos++
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, jsonMember{rawKey: rawKey, key: key, value: val})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, errors.New("json: unexpected end of object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return nil, fmt.Errorf("json: expected ',' or '}' at offset %d", p.pos)
		}
	}
}

func (p *jsonParser) array(depth int) (*jsonValue, error) {
	v := &jsonValue{kind: jsonArray, items: []*jsonValue{}}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		item, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.items = append(v.items, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, errors.New("json: unexpected end of array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return nil, fmt.Errorf("json: expected ',' or ']' at offset %d", p.pos)
		}
	}
}

// writeCompact appends v to buf with no insignificant white space.
func (v *jsonValue) writeCompact(buf *bytes.Buffer) {
	switch v.kind {
	case jsonScalar:
		buf.Write(v.raw)
	case jsonObject:
		buf.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(m.rawKey)
			buf.WriteByte(':')
			m.value.writeCompact(buf)
		}
		buf.WriteByte('}')
	case jsonArray:
		buf.WriteByte('[')
		for i, item := range v.items {
			if i > 0 {
				buf.WriteByte(',')
			}
			item.writeCompact(buf)
		}
		buf.WriteByte(']')
	}
}

// field returns the value of member key of an object, or nil.
func (v *jsonValue) field(key string) *jsonValue {
	if v == nil || v.kind != jsonObject {
		return nil
	}
	for _, m := range v.members {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// unquoteInteger turns a scalar holding a quoted integer ("8") into the
// bare JSON number (8). Anything else is left alone, so a value that is
// already a number, or is not an integer, passes through unchanged.
func (v *jsonValue) unquoteInteger() {
	if v == nil || v.kind != jsonScalar || len(v.raw) < 3 || v.raw[0] != '"' {
		return
	}
	digits := v.raw[1 : len(v.raw)-1]
	if !isJSONInteger(digits) {
		return
	}
	v.raw = digits
}

// isJSONInteger reports whether b is -?[0-9]+ without superfluous leading
// zeros, i.e. a valid JSON integer literal.
func isJSONInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (len(b) > 1 && b[0] == '0') {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
