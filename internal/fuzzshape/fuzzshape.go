// Package fuzzshape turns fuzz input into tensor shapes and back, for the
// fuzz targets that send hostile shapes through the core's validation on
// every transport's path (core, core/python, platforms/grpcapi,
// platforms/httpapi).
package fuzzshape

import (
	"encoding/binary"
	"math/big"
)

// Shape reads up to 8 dims, 8 little-endian bytes each.
func Shape(b []byte) []int64 {
	var shape []int64
	for len(b) >= 8 && len(shape) < 8 {
		shape = append(shape, int64(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	return shape
}

// Bytes is the fuzz input that Shape reads as shape.
func Bytes(shape ...int64) []byte {
	var b []byte
	for _, d := range shape {
		b = binary.LittleEndian.AppendUint64(b, uint64(d))
	}
	return b
}

// ExactByteSize is a shape's byte size for elements of size bytes, without
// wrapping: no dims counts 0, as core.ElementCount does; a zero or negative
// dim gives 0 or a negative size, which no valid input has.
func ExactByteSize(shape []int64, size int) *big.Int {
	if len(shape) == 0 {
		return new(big.Int)
	}
	n := big.NewInt(int64(size))
	for _, d := range shape {
		n.Mul(n, big.NewInt(d))
	}
	return n
}
