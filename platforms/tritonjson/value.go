package tritonjson

import (
	"bytes"
	"iter"
	"math"
	"strconv"
	"unsafe"

	"github.com/inferd/inferd/core/status"
)

// TritonJson's type-access error texts (triton-inference-server/common
// include/triton/common/triton_json.h). They are usually
// wrapped as "Unable to parse '<field>': <text>" and are INTERNAL (500).
const (
	MsgNonString = "attempt to access JSON non-string as string"
	MsgNonBool   = "attempt to access JSON non-boolean as boolean"
	MsgNonInt    = "attempt to access JSON non-signed-integer as signed-integer"
	MsgNonUint   = "attempt to access JSON non-unsigned-integer as unsigned-integer"
	MsgNonNumber = "attempt to access JSON non-number as double"
	MsgNonArray  = "attempt to access JSON non-array as array"
	MsgNonObject = "attempt to access JSON non-object as object"
)

// MsgMissingMember is the text for an absent object member (or a lookup on a
// non-object).
func MsgMissingMember(name string) string {
	return "attempt to access non-existing object member '" + name + "'"
}

func typeError(msg string) error { return &status.Error{Code: status.CodeInternal, Msg: msg} }

// Value is one value of a Document. The zero Value stands for an absent
// member: it has KindInvalid and every typed accessor fails on it.
type Value struct {
	d *Document
	i uint32
}

func (v Value) node() *node { return &v.d.nodes[v.i] }

// Exists reports whether v is a real value (not an absent member).
func (v Value) Exists() bool { return v.d != nil }

// Kind returns the JSON type of v.
func (v Value) Kind() Kind {
	if v.d == nil {
		return KindInvalid
	}
	return v.node().kind
}

// IsNull reports whether v is JSON null.
func (v Value) IsNull() bool { return v.Kind() == KindNull }

// IsBool reports whether v is true or false.
func (v Value) IsBool() bool { return v.Kind() == KindBool }

// IsNumber reports whether v is a number (NaN and infinities included).
func (v Value) IsNumber() bool { return v.Kind() == KindNumber }

// IsString reports whether v is a string.
func (v Value) IsString() bool { return v.Kind() == KindString }

// IsArray reports whether v is an array.
func (v Value) IsArray() bool { return v.Kind() == KindArray }

// IsObject reports whether v is an object.
func (v Value) IsObject() bool { return v.Kind() == KindObject }

// IsInt64 reports whether v is an integer literal within int64 (RapidJSON
// IsInt64: "1.0" and "1e2" are not integers).
func (v Value) IsInt64() bool { return v.Kind() == KindNumber && v.node().flags&numInt != 0 }

// IsUint64 reports whether v is an integer literal within uint64 ("-0"
// included, "-1" not).
func (v Value) IsUint64() bool { return v.Kind() == KindNumber && v.node().flags&numUint != 0 }

// Bool returns the value of a boolean.
func (v Value) Bool() (bool, error) {
	if v.Kind() != KindBool {
		return false, typeError(MsgNonBool)
	}
	return v.node().flags == 1, nil
}

// Int64 returns the value of a signed integer.
func (v Value) Int64() (int64, error) {
	if !v.IsInt64() {
		return 0, typeError(MsgNonInt)
	}
	return v.d.int64At(v.node()), nil
}

// Uint64 returns the value of an unsigned integer.
func (v Value) Uint64() (uint64, error) {
	if !v.IsUint64() {
		return 0, typeError(MsgNonUint)
	}
	m, _ := intMagnitude(v.d.text(v.node()))
	return m, nil
}

// Float64 returns any number as a double (integers converted).
func (v Value) Float64() (float64, error) {
	if v.Kind() != KindNumber {
		return 0, typeError(MsgNonNumber)
	}
	return v.d.float64At(v.node()), nil
}

// StringBytes returns the raw (unescaped) bytes of a string, which may hold
// NUL or invalid UTF-8. The slice aliases the document: do not modify it.
func (v Value) StringBytes() ([]byte, error) {
	if v.Kind() != KindString {
		return nil, typeError(MsgNonString)
	}
	return v.d.str(v.node()), nil
}

// Str returns a string's bytes as a Go string (a copy). (Not String, so
// that Value does not look like a fmt.Stringer.)
func (v Value) Str() (string, error) {
	b, err := v.StringBytes()
	return string(b), err
}

// CString is String cut at the first NUL byte: what Triton keeps of a string
// it passes on as a C string (ids, names, string parameters).
func (v Value) CString() (string, error) {
	b, err := v.StringBytes()
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b), err
}

// Len returns the number of elements of an array or members of an object,
// and 0 for anything else (TritonJson ArraySize).
func (v Value) Len() int {
	switch v.Kind() {
	case KindArray, KindObject:
		return int(v.node().count)
	}
	return 0
}

// next returns the index of the value after the one at i (skipping its
// descendants).
func (d *Document) next(i uint32) uint32 {
	if k := d.nodes[i].kind; k == KindArray || k == KindObject {
		return d.nodes[i].n
	}
	return i + 1
}

// Elements iterates over the elements of an array (nothing for other kinds).
func (v Value) Elements() iter.Seq2[int, Value] {
	return func(yield func(int, Value) bool) {
		if v.Kind() != KindArray {
			return
		}
		end := v.node().n
		for i, k := v.i+1, 0; i < end; i, k = v.d.next(i), k+1 {
			if !yield(k, Value{v.d, i}) {
				return
			}
		}
	}
}

// Index returns element i of an array.
func (v Value) Index(i int) (Value, error) {
	if v.Kind() == KindArray && i >= 0 && i < v.Len() {
		for k, e := range v.Elements() {
			if k == i {
				return e, nil
			}
		}
	}
	return Value{}, typeError("attempt to access non-existing array index '" + strconv.Itoa(i) + "'")
}

// Members iterates over the members of an object in document order,
// duplicates included (nothing for other kinds). The key aliases the
// document.
func (v Value) Members() iter.Seq2[[]byte, Value] {
	return func(yield func([]byte, Value) bool) {
		if v.Kind() != KindObject {
			return
		}
		end := v.node().n
		for i := v.i + 1; i < end; i = v.d.next(i + 1) {
			if !yield(v.d.str(&v.d.nodes[i]), Value{v.d, i + 1}) {
				return
			}
		}
	}
}

// Find returns the first member named name, as RapidJSON's FindMember (an
// exact byte comparison of the unescaped key). It reports false when v is
// not an object or has no such member.
func (v Value) Find(name string) (Value, bool) {
	if v.Kind() != KindObject {
		return Value{}, false
	}
	end := v.node().n
	for i := v.i + 1; i < end; i = v.d.next(i + 1) {
		if string(v.d.str(&v.d.nodes[i])) == name {
			return Value{v.d, i + 1}, true
		}
	}
	return Value{}, false
}

// Has reports whether v is an object with a member named name.
func (v Value) Has(name string) bool {
	_, ok := v.Find(name)
	return ok
}

// Member returns the member named name, or the missing-member error.
func (v Value) Member(name string) (Value, error) {
	m, ok := v.Find(name)
	if !ok {
		return Value{}, typeError(MsgMissingMember(name))
	}
	return m, nil
}

// MemberString is TritonJson MemberAsString: the member's bytes.
func (v Value) MemberString(name string) ([]byte, error) {
	m, err := v.Member(name)
	if err != nil {
		return nil, err
	}
	return m.StringBytes()
}

// MemberBool is TritonJson MemberAsBool.
func (v Value) MemberBool(name string) (bool, error) {
	m, err := v.Member(name)
	if err != nil {
		return false, err
	}
	return m.Bool()
}

// MemberInt64 is TritonJson MemberAsInt.
func (v Value) MemberInt64(name string) (int64, error) {
	m, err := v.Member(name)
	if err != nil {
		return 0, err
	}
	return m.Int64()
}

// MemberUint64 is TritonJson MemberAsUInt.
func (v Value) MemberUint64(name string) (uint64, error) {
	m, err := v.Member(name)
	if err != nil {
		return 0, err
	}
	return m.Uint64()
}

// MemberFloat64 is TritonJson MemberAsDouble.
func (v Value) MemberFloat64(name string) (float64, error) {
	m, err := v.Member(name)
	if err != nil {
		return 0, err
	}
	return m.Float64()
}

// MemberArray is TritonJson MemberAsArray.
func (v Value) MemberArray(name string) (Value, error) {
	m, err := v.Member(name)
	if err != nil {
		return Value{}, err
	}
	if !m.IsArray() {
		return Value{}, typeError(MsgNonArray)
	}
	return m, nil
}

// MemberObject is TritonJson MemberAsObject.
func (v Value) MemberObject(name string) (Value, error) {
	m, err := v.Member(name)
	if err != nil {
		return Value{}, err
	}
	if !m.IsObject() {
		return Value{}, typeError(MsgNonObject)
	}
	return m, nil
}

// Raw returns the source text of a scalar (for strings: the escaped content
// between the quotes when the string had no escapes). Containers return nil.
func (v Value) Raw() []byte {
	switch v.Kind() {
	case KindNumber:
		return v.d.text(v.node())
	case KindString:
		if v.node().flags&strEscaped == 0 {
			return v.d.str(v.node())
		}
	}
	return nil
}

// text is a scalar's source text.
func (d *Document) text(n *node) []byte { return d.src[n.off : n.off+n.n : n.off+n.n] }

// str is a string's unescaped bytes.
func (d *Document) str(n *node) []byte {
	if n.flags&strEscaped != 0 {
		return d.arena[n.off : n.off+n.n : n.off+n.n]
	}
	return d.src[n.off : n.off+n.n : n.off+n.n]
}

// intMagnitude decodes an integer literal "-?[0-9]+" known to fit uint64
// magnitude (the parser classified it).
func intMagnitude(t []byte) (m uint64, neg bool) {
	if len(t) > 0 && t[0] == '-' {
		neg = true
		t = t[1:]
	}
	for _, c := range t {
		m = m*10 + uint64(c-'0')
	}
	return m, neg
}

// int64At is the value of a node with numInt.
func (d *Document) int64At(n *node) int64 {
	m, neg := intMagnitude(d.text(n))
	if neg {
		return int64(-m) // two's complement also covers -2^63
	}
	return int64(m)
}

// float64At is RapidJSON GetDouble for any number node. Decimal text is
// converted with correct rounding (RapidJSON's normal-precision mode can be
// off by an ulp for long mantissas; clients expect the exact value).
func (d *Document) float64At(n *node) float64 {
	t := d.text(n)
	switch f := n.flags; {
	case f&numInt != 0:
		return float64(d.int64At(n))
	case f&numUint != 0:
		m, _ := intMagnitude(t)
		return float64(m)
	case f&numNaN != 0:
		return math.NaN()
	case f&numInf != 0:
		if t[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	case f&numOddSpecial != 0:
		return oddSpecialValue(t)
	}
	return parseFloatText(t)
}

// parseFloatText converts validated JSON number text. Out-of-range values
// come back as ±Inf (RapidJSON 1.1.0 yields infinity there too).
func parseFloatText(t []byte) float64 {
	f, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(t), len(t)), 64)
	return f
}

// oddSpecialValue is RapidJSON's value for NaN/Inf followed by a fraction
// or exponent ("NaN.5", "-Infe2"): the NaN/Inf is dropped and the number
// is built from a zero integer part and what follows.
func oddSpecialValue(t []byte) float64 {
	neg := t[0] == '-'
	i := bytes.IndexAny(t, ".eE")
	var buf [64]byte
	s := append(append(buf[:0], '0'), t[i:]...)
	f := parseFloatText(s)
	if neg {
		f = -f
	}
	return f
}
