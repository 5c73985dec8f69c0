package core

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tensor holds one named tensor. Data is the row-major little-endian payload,
// kept once as bytes so no element is boxed on the hot path. BYTES tensors
// hold each element as a 4-byte little-endian length followed by its bytes,
// the same layout as the binary tensor extension.
type Tensor struct {
	Name     string
	DataType DataType
	Shape    []int64
	Data     []byte
}

// ElementCount is the product of the dimensions. An empty shape counts as 0
// elements, as Triton's HTTP frontend does; negative dims count as 0.
func ElementCount(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return 0
		}
		if n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return n
}

// ShapeString formats a shape as Triton does in messages: [1,16].
func ShapeString(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// BytesElements splits a BYTES payload into its elements, without copying.
// It fails when a length prefix runs past the end of the data.
func BytesElements(data []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 4 {
			return nil, fmt.Errorf("truncated BYTES element length at byte %d", off)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		off += 4
		if n > len(data)-off {
			return nil, fmt.Errorf("BYTES element of %d bytes at byte %d runs past the end of the tensor", n, off)
		}
		out = append(out, data[off:off+n:off+n])
		off += n
	}
	return out, nil
}

// CountBytesElements counts the elements of a BYTES payload, or returns -1
// when the framing is broken.
func CountBytesElements(data []byte) int64 {
	var n int64
	for off := 0; off < len(data); n++ {
		if len(data)-off < 4 {
			return -1
		}
		l := int(binary.LittleEndian.Uint32(data[off:]))
		off += 4
		if l > len(data)-off {
			return -1
		}
		off += l
	}
	return n
}

// bytesOffset is the byte offset just past the first k elements of a BYTES
// payload, or -1 when the data holds fewer than k whole elements.
func bytesOffset(data []byte, k int64) int {
	off := 0
	for range k {
		if len(data)-off < 4 {
			return -1
		}
		l := int(binary.LittleEndian.Uint32(data[off:]))
		off += 4
		if l > len(data)-off {
			return -1
		}
		off += l
	}
	return off
}

// AppendBytesElement appends one length-prefixed element to a BYTES payload.
func AppendBytesElement(dst, elem []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(elem)))
	return append(dst, elem...)
}
