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
	// Device, when not nil, holds the bytes in place of Data (nil): an
	// input read from a client's CUDA shared-memory region. It reaches
	// only a backend that reads such memory itself (DeviceReader); for
	// every other model the core copies it into Data first (OnHost).
	Device DeviceData
}

// DeviceData is a tensor's bytes in memory a backend may read by address
// rather than through a Go slice: a client's CUDA region, whose bytes ONNX
// Runtime's CUDA provider reads where they are (triton-inference-server/
// onnxruntime_backend binds such inputs to the session as GPU tensors).
type DeviceData interface {
	// DeviceID is the GPU holding the bytes; -1 is host memory
	// (a CPU-only stand-in of a device, for tests).
	DeviceID() int64
	// Addr is the address of the first byte in that memory.
	Addr() uintptr
	// Size is the byte count.
	Size() int
	// CopyOut copies the first len(dst) bytes to host memory.
	CopyOut(dst []byte) error
}

// ByteLen is the tensor's byte count, wherever its bytes are.
func (t *Tensor) ByteLen() int {
	if t.Device != nil {
		return t.Device.Size()
	}
	return len(t.Data)
}

// OnHost copies a tensor held in device memory into Data; a tensor whose
// bytes are already in Data is left alone.
func (t *Tensor) OnHost() error {
	if t.Device == nil {
		return nil
	}
	b := make([]byte, t.Device.Size())
	if err := t.Device.CopyOut(b); err != nil {
		return fmt.Errorf("input '%s': %w", t.Name, err)
	}
	t.Data, t.Device = b, nil
	return nil
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

// walkBytes is the one walker over a BYTES payload's length-prefixed
// elements. It visits up to limit elements (all of them when limit < 0),
// calling visit (when non-nil) with each element, and returns how many it
// walked and the byte offset just past the last. The framing is broken when
// a length prefix is truncated or runs past the end of the data.
func walkBytes(data []byte, limit int64, visit func([]byte)) (n int64, end int, err error) {
	off := 0
	for ; off < len(data) && (limit < 0 || n < limit); n++ {
		if len(data)-off < 4 {
			return n, off, fmt.Errorf("truncated BYTES element length at byte %d", off)
		}
		l := int(binary.LittleEndian.Uint32(data[off:]))
		off += 4
		if l > len(data)-off {
			return n, off, fmt.Errorf("BYTES element of %d bytes at byte %d runs past the end of the tensor", l, off)
		}
		if visit != nil {
			visit(data[off : off+l : off+l])
		}
		off += l
	}
	return n, off, nil
}

// BytesElements splits a BYTES payload into its elements, without copying.
// It fails when a length prefix runs past the end of the data.
func BytesElements(data []byte) ([][]byte, error) {
	var out [][]byte
	if _, _, err := walkBytes(data, -1, func(e []byte) { out = append(out, e) }); err != nil {
		return nil, err
	}
	return out, nil
}

// CountBytesElements counts the elements of a BYTES payload, or returns -1
// when the framing is broken.
func CountBytesElements(data []byte) int64 {
	n, _, err := walkBytes(data, -1, nil)
	if err != nil {
		return -1
	}
	return n
}

// bytesOffset is the byte offset just past the first k elements of a BYTES
// payload, or -1 when the data holds fewer than k whole elements.
func bytesOffset(data []byte, k int64) int {
	n, end, err := walkBytes(data, k, nil)
	if err != nil || n < k {
		return -1
	}
	return end
}

// AppendBytesElement appends one length-prefixed element to a BYTES payload.
func AppendBytesElement(dst, elem []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(elem)))
	return append(dst, elem...)
}
