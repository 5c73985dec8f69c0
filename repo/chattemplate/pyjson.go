package chattemplate

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// tojsonFilter is the name templates' tojson filter is renamed to: the
// engine looks its own filters up before the render's variables, and its
// tojson differs from Python's json.dumps with indent (sorted keys,
// HTML-escaped: Llama 3.1–3.3 print tools with `tojson(indent=4)`) and on
// floats (1.0 printed as 1).
const tojsonFilter = "inferd_tojson"

// tojsonUse matches the tojson filter applied with `|`.
var tojsonUse = regexp.MustCompile(`\|\s*tojson\b`)

// renameTojson points a template's tojson filters at tojsonFilter.
func renameTojson(src string) string {
	return tojsonUse.ReplaceAllString(src, "|"+tojsonFilter)
}

// pyTojson is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), keywords honoured.
func pyTojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Undefined(), errors.New("tojson takes no positional arguments")
	}
	e := pyEncoder{item: ", ", key: ": "}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() {
		switch {
		case v.IsInt():
			e.indent = strings.Repeat(" ", int(min(max(v.AsInt(), 0), 64)))
		case v.IsString():
			e.indent = v.AsString()
		default:
			return jinja.Undefined(), errors.New("tojson: indent must be an integer or a string")
		}
		e.item, e.pretty = ",", true
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		e.item, e.key = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		e.ascii = v.IsTruthy()
	}
	if err := e.encode(args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(e.b.String()), nil
}

type pyEncoder struct {
	b                       strings.Builder
	item, key, indent       string
	pretty, sortKeys, ascii bool
}

func (e *pyEncoder) newline(level int) {
	if e.pretty {
		e.b.WriteByte('\n')
		for range level {
			e.b.WriteString(e.indent)
		}
	}
}

func (e *pyEncoder) encode(v jinja.Value, level int) error {
	if level > 2*MaxDepth {
		return errors.New("tojson: value nested too deeply")
	}
	switch {
	case v.IsNone(), v.IsUndefined():
		e.b.WriteString("null")
	case v.IsBool():
		e.b.WriteString(map[bool]string{true: "true", false: "false"}[v.AsBool()])
	case v.IsInt():
		e.b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		e.b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.str(v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			e.b.WriteString("[]")
			return nil
		}
		e.b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				e.b.WriteString(e.item)
			}
			e.newline(level + 1)
			if err := e.encode(it, level+1); err != nil {
				return err
			}
		}
		e.newline(level)
		e.b.WriteByte(']')
	case v.IsDict():
		return e.dict(v.AsDict(), level)
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", v.String())
	}
	return nil
}

func (e *pyEncoder) dict(d *jinja.Dict, level int) error {
	keys := d.OrderedKeys()
	if len(keys) == 0 {
		e.b.WriteString("{}")
		return nil
	}
	if e.sortKeys {
		sort.Strings(keys)
	}
	e.b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			e.b.WriteString(e.item)
		}
		e.newline(level + 1)
		e.str(k)
		e.b.WriteString(e.key)
		v, _ := d.Get(k)
		if err := e.encode(v, level+1); err != nil {
			return err
		}
	}
	e.newline(level)
	e.b.WriteByte('}')
	return nil
}

// str writes s as Python's json encoder does (cpython Lib/json/encoder.py
// ESCAPE and ESCAPE_ASCII).
func (e *pyEncoder) str(s string) {
	e.b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			e.b.WriteString(`\"`)
		case '\\':
			e.b.WriteString(`\\`)
		case '\n':
			e.b.WriteString(`\n`)
		case '\r':
			e.b.WriteString(`\r`)
		case '\t':
			e.b.WriteString(`\t`)
		case '\b':
			e.b.WriteString(`\b`)
		case '\f':
			e.b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(&e.b, `\u%04x`, r)
			case e.ascii && r > 0x7e && r > 0xffff:
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(&e.b, `\u%04x\u%04x`, r1, r2)
			case e.ascii && r > 0x7e:
				fmt.Fprintf(&e.b, `\u%04x`, r)
			default:
				e.b.WriteRune(r)
			}
		}
	}
	e.b.WriteByte('"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// pyFloat is Python's repr of a float: the shortest round-tripping digits,
// positional for exponents -4 to 15 (with ".0" when integral), else
// scientific with a two-digit exponent at least; NaN and infinities as
// json.dumps writes them.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(sci, "e")
	x, _ := strconv.Atoi(exp)
	if x >= -4 && x < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, x)
}
