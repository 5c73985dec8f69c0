package codec

import (
	"encoding/binary"
	"math"

	"github.com/inferd/inferd/core"
)

// jsonTensor converts an input's JSON "data" array holding count elements
// into tensor bytes (ReadDataFromJson in triton-inference-server/server
// src/http_server.cc). Nested arrays are flattened in
// document order whatever their structure; only the element count must
// match. The walk runs over the parsed document's node list, so no value is
// boxed and nothing is allocated besides the result.
func (d *decoder) jsonTensor(name string, dt core.DataType, count int64, data Value) ([]byte, error) {
	if dt == core.TypeBytes {
		return d.jsonBytesTensor(name, data)
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
	doc := data.d
	end := doc.nodes[data.i].n
	// Each element is at least one node, so a count beyond the nodes under
	// data cannot be met: walk for the errors Triton would report first,
	// without allocating a buffer sized by a hostile shape.
	var out []byte
	if count <= int64(end-data.i-1) {
		out = make([]byte, byteSize)
	}
	var n int64
	var w walker
	for i := data.i + 1; i < end; {
		nd := &doc.nodes[i]
		if w.enter(i, nd) {
			return nil, errNestingTooDeep()
		}
		if nd.kind == KindArray {
			i++
			continue
		}
		// A scalar (an object counts as one, and fails the type check).
		if n >= count {
			return nil, errTooManyElements()
		}
		v, err := elementBits(doc, nd, dt)
		if err != nil {
			return nil, wrap("Unable to parse 'data'", err)
		}
		if out != nil {
			le := binary.LittleEndian
			switch size {
			case 1:
				out[n] = byte(v)
			case 2:
				le.PutUint16(out[2*n:], uint16(v))
			case 4:
				le.PutUint32(out[4*n:], uint32(v))
			default:
				le.PutUint64(out[8*n:], v)
			}
		}
		n++
		i = doc.next(i)
	}
	if n != count {
		return nil, errTooFewElements()
	}
	return out, nil
}

// elementBits converts one JSON scalar to the little-endian bit pattern of
// a dt element (truncated to the element width by the caller), with
// TritonJson's type checks.
func elementBits(doc *Document, nd *node, dt core.DataType) (uint64, error) {
	switch dt {
	case core.TypeBool:
		if nd.kind != KindBool {
			return 0, typeError(MsgNonBool)
		}
		return uint64(nd.flags), nil
	case core.TypeUint8, core.TypeUint16, core.TypeUint32, core.TypeUint64:
		if nd.kind != KindNumber || nd.flags&numUint == 0 {
			return 0, typeError(MsgNonUint)
		}
		u, _ := intMagnitude(doc.text(nd))
		return u, nil
	case core.TypeInt8, core.TypeInt16, core.TypeInt32, core.TypeInt64:
		if nd.kind != KindNumber || nd.flags&numInt == 0 {
			return 0, typeError(MsgNonInt)
		}
		return uint64(doc.int64At(nd)), nil
	case core.TypeFP32:
		if nd.kind != KindNumber {
			return 0, typeError(MsgNonNumber)
		}
		return uint64(math.Float32bits(float32(doc.float64At(nd)))), nil
	}
	// FP64
	if nd.kind != KindNumber {
		return 0, typeError(MsgNonNumber)
	}
	return math.Float64bits(doc.float64At(nd)), nil
}

// jsonBytesTensor converts BYTES data: a first pass sizes the result (and
// rejects non-strings, as Triton's JsonBytesArrayByteSize), a second writes
// each string as a 4-byte little-endian length and its raw bytes. The
// element count is not checked here: the core reports a mismatch (400).
func (d *decoder) jsonBytesTensor(name string, data Value) ([]byte, error) {
	doc := data.d
	end := doc.nodes[data.i].n
	var total int64
	var w walker
	for i := data.i + 1; i < end; {
		nd := &doc.nodes[i]
		if w.enter(i, nd) {
			return nil, errNestingTooDeep()
		}
		if nd.kind == KindArray {
			i++
			continue
		}
		if nd.kind != KindString {
			return nil, wrap("Unable to parse JSON bytes array", typeError(MsgNonString))
		}
		total += 4 + int64(nd.n)
		i++
	}
	if d.max > 0 && total > d.max {
		return nil, jsonInputTooLargeError(name, total, d.max)
	}
	out := make([]byte, 0, total)
	for i := data.i + 1; i < end; i++ {
		if nd := &doc.nodes[i]; nd.kind == KindString {
			out = core.AppendBytesElement(out, doc.str(nd))
		}
	}
	return out, nil
}

// walker tracks how many arrays enclose the current node of a pre-order walk
// below a data array, to enforce MaxDataNesting.
type walker struct {
	ends  [MaxDataNesting]uint32 // end index of each open nested array
	depth int
}

// enter moves to node i and reports whether it is nested too deeply: a node
// enclosed by MaxDataNesting arrays (the data array included) fails.
func (w *walker) enter(i uint32, nd *node) bool {
	for w.depth > 0 && i >= w.ends[w.depth-1] {
		w.depth--
	}
	if w.depth+1 >= MaxDataNesting {
		return true
	}
	if nd.kind == KindArray {
		w.ends[w.depth] = nd.n
		w.depth++
	}
	return false
}
