package onnxbuild

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Encode writes vals as raw tensor bytes of type elem: fixed-width
// little-endian, bool one byte per element, float16/bfloat16 rounded to
// nearest even. Values are float64 so one helper covers every numeric type;
// for integer types each value must be a whole number in range (so int64 and
// uint64 are exact only up to 2^53), for Bool it must be 0 or 1.
func Encode(elem DataType, vals []float64) ([]byte, error) {
	size := elem.Size()
	if size == 0 {
		return nil, fmt.Errorf("onnxbuild: encode: %v has no fixed-width encoding", elem)
	}
	out := make([]byte, 0, size*len(vals))
	le := binary.LittleEndian
	for i, v := range vals {
		if err := checkRange(elem, v); err != nil {
			return nil, fmt.Errorf("onnxbuild: encode %v element %d: %w", elem, i, err)
		}
		switch elem {
		case Float:
			out = le.AppendUint32(out, math.Float32bits(float32(v)))
		case Double:
			out = le.AppendUint64(out, math.Float64bits(v))
		case Float16:
			out = le.AppendUint16(out, Float32ToFloat16(float32(v)))
		case BFloat16:
			out = le.AppendUint16(out, Float32ToBFloat16(float32(v)))
		case Bool, Uint8:
			out = append(out, uint8(v))
		case Int8:
			out = append(out, uint8(int8(v)))
		case Uint16:
			out = le.AppendUint16(out, uint16(v))
		case Int16:
			out = le.AppendUint16(out, uint16(int16(v)))
		case Uint32:
			out = le.AppendUint32(out, uint32(v))
		case Int32:
			out = le.AppendUint32(out, uint32(int32(v)))
		case Uint64:
			out = le.AppendUint64(out, uint64(v))
		case Int64:
			out = le.AppendUint64(out, uint64(int64(v)))
		}
	}
	return out, nil
}

// checkRange rejects values that elem cannot hold exactly (integer types) or
// at all (bool); floating types take anything and round.
func checkRange(elem DataType, v float64) error {
	var lo, hi float64
	switch elem {
	case Float, Double, Float16, BFloat16:
		return nil
	case Bool:
		lo, hi = 0, 1
	case Uint8:
		lo, hi = 0, math.MaxUint8
	case Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case Uint16:
		lo, hi = 0, math.MaxUint16
	case Int16:
		lo, hi = math.MinInt16, math.MaxInt16
	case Uint32:
		lo, hi = 0, math.MaxUint32
	case Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case Uint64:
		// 2^64 itself is the first float64 past the range.
		lo, hi = 0, math.Nextafter(math.MaxUint64, 0)
	case Int64:
		lo, hi = math.MinInt64, math.Nextafter(math.MaxInt64, 0)
	}
	if v != math.Trunc(v) || v < lo || v > hi {
		return fmt.Errorf("%v does not fit", v)
	}
	return nil
}

// Decode is the inverse of Encode: it reads raw tensor bytes of type elem
// into float64s (int64/uint64 beyond 2^53 lose precision).
func Decode(elem DataType, raw []byte) ([]float64, error) {
	size := elem.Size()
	if size == 0 {
		return nil, fmt.Errorf("onnxbuild: decode: %v has no fixed-width encoding", elem)
	}
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("onnxbuild: decode %v: %d bytes is not a multiple of %d", elem, len(raw), size)
	}
	le := binary.LittleEndian
	out := make([]float64, 0, len(raw)/size)
	for b := raw; len(b) > 0; b = b[size:] {
		var v float64
		switch elem {
		case Float:
			v = float64(math.Float32frombits(le.Uint32(b)))
		case Double:
			v = math.Float64frombits(le.Uint64(b))
		case Float16:
			v = float64(Float16ToFloat32(le.Uint16(b)))
		case BFloat16:
			v = float64(BFloat16ToFloat32(le.Uint16(b)))
		case Bool, Uint8:
			v = float64(b[0])
		case Int8:
			v = float64(int8(b[0]))
		case Uint16:
			v = float64(le.Uint16(b))
		case Int16:
			v = float64(int16(le.Uint16(b)))
		case Uint32:
			v = float64(le.Uint32(b))
		case Int32:
			v = float64(int32(le.Uint32(b)))
		case Uint64:
			v = float64(le.Uint64(b))
		case Int64:
			v = float64(int64(le.Uint64(b)))
		}
		out = append(out, v)
	}
	return out, nil
}

// Float32ToFloat16 converts f to IEEE 754 half precision bits, rounding to
// nearest even; too large becomes ±Inf, too small ±0 or a subnormal.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	if e := exp - 127 + 15; e > 0 {
		if e >= 0x1f {
			return sign | 0x7c00
		}
		h := uint32(e)<<10 | mant>>13
		// A carry out of the mantissa correctly bumps the exponent, up to Inf.
		if rest := mant & 0x1fff; rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	// Subnormal half: value/2^-24 = (1.mant * 2^23) >> (126-exp).
	shift := uint(126 - exp)
	if shift > 24 {
		return sign
	}
	m := mant | 0x800000
	h := m >> shift
	rest, half := m&(1<<shift-1), uint32(1)<<(shift-1)
	if rest > half || (rest == half && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// Float16ToFloat32 converts IEEE 754 half precision bits to float32 (exact).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		v := float32(mant) / (1 << 24) // subnormal, or zero
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToBFloat16 converts f to bfloat16 bits (the top half of a float32),
// rounding to nearest even.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // keep NaN a (quiet) NaN
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BFloat16ToFloat32 converts bfloat16 bits to float32 (exact).
func BFloat16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}
