package codec

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// jsonTensor converts an input's JSON "data" array holding count elements
// into tensor bytes (ReadDataFromJson in triton-inference-server/server
// src/http_server.cc). Nested arrays are flattened in
// document order whatever their structure; only the element count must
// match. The walk runs over the parsed document in place, so no value is
// boxed and nothing is allocated besides the result. The walk stops once
// ctx is done.
func (d *decoder) jsonTensor(ctx context.Context, name string, dt core.DataType, count int64, data tritonjson.Value) ([]byte, error) {
	if dt == core.TypeBytes {
		return d.jsonBytesTensor(ctx, name, data)
	}
	size := dt.ByteSize()
	if size > 0 && count > math.MaxInt64/int64(size) {
		return nil, byteSizeOverflowError(name, count, size)
	}
	byteSize := count * int64(size)
	if d.max > 0 && byteSize > d.max {
		return nil, jsonInputTooLargeError(name, byteSize, d.max)
	}
	switch dt {
	case core.TypeFP16, core.TypeBF16:
		return nil, invalidArg("receiving " + dt.String() + " data via JSON is not supported. Please use the binary data format for input " + name)
	case core.TypeInvalid:
		return nil, invalidArg("invalid datatype for input " + name)
	}
	// Each element is at least one value nested in data, so a count beyond
	// them cannot be met: walk for the errors Triton would report first,
	// without allocating a buffer sized by a hostile shape.
	var out []byte
	if count <= int64(data.End()-data.Pos()-1) {
		out = make([]byte, byteSize)
	}
	var n int64
	var nest nesting
	w := data.ArrayWalk()
	step := 0
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if err := alive(ctx, step); err != nil {
			return nil, err
		}
		step++
		if nest.enter(v) {
			return nil, errNestingTooDeep()
		}
		if v.IsArray() {
			continue
		}
		// A scalar (an object counts as one, and fails the type check).
		if n >= count {
			return nil, errTooManyElements()
		}
		bits, err := elementBits(v, dt)
		if err != nil {
			return nil, wrap("Unable to parse 'data'", err)
		}
		if out != nil {
			le := binary.LittleEndian
			switch size {
			case 1:
				out[n] = byte(bits)
			case 2:
				le.PutUint16(out[2*n:], uint16(bits))
			case 4:
				le.PutUint32(out[4*n:], uint32(bits))
			default:
				le.PutUint64(out[8*n:], bits)
			}
		}
		n++
	}
	if n != count {
		return nil, errTooFewElements()
	}
	return out, nil
}

// elementBits converts one JSON scalar to the little-endian bit pattern of
// a dt element (truncated to the element width by the caller), with
// TritonJson's type checks.
func elementBits(v tritonjson.Value, dt core.DataType) (uint64, error) {
	switch dt {
	case core.TypeBool:
		b, err := v.Bool()
		if b {
			return 1, err
		}
		return 0, err
	case core.TypeUint8, core.TypeUint16, core.TypeUint32, core.TypeUint64:
		return v.Uint64()
	case core.TypeInt8, core.TypeInt16, core.TypeInt32, core.TypeInt64:
		i, err := v.Int64()
		return uint64(i), err
	case core.TypeFP32:
		f, err := v.Float64()
		return uint64(math.Float32bits(float32(f))), err
	}
	// FP64
	f, err := v.Float64()
	return math.Float64bits(f), err
}

// jsonBytesTensor converts BYTES data: a first pass sizes the result (and
// rejects non-strings, as Triton's JsonBytesArrayByteSize), a second writes
// each string as a 4-byte little-endian length and its raw bytes. The
// element count is not checked here: the core reports a mismatch (400).
func (d *decoder) jsonBytesTensor(ctx context.Context, name string, data tritonjson.Value) ([]byte, error) {
	var total int64
	var nest nesting
	w := data.ArrayWalk()
	step := 0
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if err := alive(ctx, step); err != nil {
			return nil, err
		}
		step++
		if nest.enter(v) {
			return nil, errNestingTooDeep()
		}
		if v.IsArray() {
			continue
		}
		s, err := v.StringBytes()
		if err != nil {
			return nil, wrap("Unable to parse JSON bytes array", err)
		}
		total += 4 + int64(len(s))
	}
	if d.max > 0 && total > d.max {
		return nil, jsonInputTooLargeError(name, total, d.max)
	}
	out := make([]byte, 0, total)
	w = data.ArrayWalk()
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if s, err := v.StringBytes(); err == nil {
			out = core.AppendBytesElement(out, s)
		}
	}
	return out, nil
}

// nesting tracks how many arrays enclose the current value of a walk
// below a data array, to enforce MaxDataNesting.
type nesting struct {
	ends  [MaxDataNesting]int // End of each open nested array
	depth int
}

// enter moves to v and reports whether it is nested too deeply: a value
// enclosed by MaxDataNesting arrays (the data array included) fails.
func (n *nesting) enter(v tritonjson.Value) bool {
	pos := v.Pos()
	for n.depth > 0 && pos >= n.ends[n.depth-1] {
		n.depth--
	}
	if n.depth+1 >= MaxDataNesting {
		return true
	}
	if v.IsArray() {
		n.ends[n.depth] = v.End()
		n.depth++
	}
	return false
}
