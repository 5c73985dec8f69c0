package tritonjson

import (
	"math"
	"strconv"
)

// AppendFloat appends f formatted as Triton's RapidJSON writer does
// (Tencent/rapidjson include/rapidjson/writer.h and internal/dtoa.h):
// Grisu2 digits, "1.0" for integral values below 1e21, plain decimals down
// to 1e-6, exponent form otherwise ("1e-7", "1.5e21"),
// "-0.0" for negative zero, and NaN, Infinity, -Infinity.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	n, k := grisu2(f, buf[:])
	return appendPrettified(dst, buf[:n], k)
}

// AppendFloat32 appends an FP32 value: Triton widens it to double first, so
// 0.1f prints as 0.10000000149011612.
func AppendFloat32(dst []byte, f float32) []byte { return AppendFloat(dst, float64(f)) }

// AppendInt appends a signed integer in decimal.
func AppendInt(dst []byte, i int64) []byte { return strconv.AppendInt(dst, i, 10) }

// AppendUint appends an unsigned integer in decimal.
func AppendUint(dst []byte, u uint64) []byte { return strconv.AppendUint(dst, u, 10) }

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendString appends s as a quoted JSON string the way RapidJSON writes
// it: '"' and '\\' escaped, control bytes as \b \t \n \f \r or \u00XX
// (upper-case hex), every other byte copied raw — no UTF-8 validation, no
// "\/", no HTML or U+2028 escaping.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// AppendStringBytes is AppendString for a byte slice (BYTES elements).
func AppendStringBytes(dst, s []byte) []byte { return appendQuoted(dst, s) }

func appendQuoted[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexUpper = "0123456789ABCDEF"

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return append(dst, '\\', 'u', '0', '0', hexUpper[c>>4], hexUpper[c&0xF])
}
