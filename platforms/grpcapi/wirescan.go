package grpcapi

import (
	"errors"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferd/inferd/core"
)

// Field numbers of ModelInferRequest, of its tensors and of
// InferTensorContents (grpc_service.proto); raw_input_contents is
// rawInputField.
const (
	reqModelName    protowire.Number = 1
	reqModelVersion protowire.Number = 2
	reqID           protowire.Number = 3
	reqParameters   protowire.Number = 4
	reqInputs       protowire.Number = 5
	reqOutputs      protowire.Number = 6

	tensorName       protowire.Number = 1
	tensorDatatype   protowire.Number = 2
	tensorShape      protowire.Number = 3
	tensorParameters protowire.Number = 4
	tensorContents   protowire.Number = 5
	outputParameters protowire.Number = 2

	// InferTensorContents' fields are bool (1), int (2), int64 (3),
	// uint (4), uint64 (5), fp32 (6), fp64 (7) and bytes (8).
	contentsFP32  protowire.Number = 6
	contentsFP64  protowire.Number = 7
	contentsBytes protowire.Number = 8
)

// What decoding a request's entries allocates beyond their bytes on the
// wire, about, in bytes, as measured for protobuf's decoding and the
// conversion into a core request: an input is its message, its pointer,
// the core's tensor and its name among those seen (about 330 bytes); an
// output about 250; a parameter a map entry and its InferParameter (about
// 260); a raw content its slice element and a shape dimension its value,
// twice. A request may take twice its size and entryAllowance more; past
// that it is refused before it is decoded, so that a message of empty
// entries (2 bytes each on the wire) cannot make the server allocate a
// hundred times its size.
const (
	inputCost      = 384
	outputCost     = 256
	parameterCost  = 256
	rawCost        = 48
	dimCost        = 16
	entryAllowance = 8 << 20
)

// errMalformed is a message the scan cannot walk; protobuf refuses it too,
// with this text.
var errMalformed = errors.New("proto: cannot parse invalid wire-format data")

// requestScan is what one walk over a ModelInferRequest's wire bytes, which
// allocates nothing, tells of it: enough to refuse it before it is decoded.
type requestScan struct {
	size               int    // of the message, in bytes
	model, version, id []byte // the last of each, as protobuf keeps it
	// Entries of the message's repeated fields and maps, all levels:
	// what decoding them costs (see inputCost).
	inputs, outputs, parameters, raw, dims int64
	// bytesWire is what the inputs' bytes_contents entries take on the
	// wire: none, and the message decodes as it is.
	bytesWire int64
	// over is the first input whose contents hold more elements than its
	// shape (or a shape that overflows); valid when exceeds is set.
	over    inputScan
	exceeds bool
}

// inputScan is what the scan tells of one InferInputTensor.
type inputScan struct {
	msg            []byte // the tensor's bytes, which it points into
	name, datatype []byte
	// elems is the shape's element count as core.ElementCount counts it
	// (-1 when it overflows); negative is set when a dimension is.
	elems    int64
	negative bool
	dims     int64
	// counts are the entries of each InferTensorContents field (index:
	// field number); bytesLen is the bytes of bytes_contents' entries,
	// bytesWire what they take on the wire.
	counts     [contentsBytes + 1]int64
	bytesLen   int64
	bytesWire  int64
	parameters int64
}

// scanRequest walks buf, a ModelInferRequest. Fields protobuf would keep
// as unknown (unknown numbers, or a known number of another wire type)
// are skipped as it skips them.
func scanRequest(buf []byte) (requestScan, error) {
	sc := requestScan{size: len(buf)}
	for len(buf) > 0 {
		num, typ, val, n := consumeField(buf)
		if n < 0 {
			return sc, errMalformed
		}
		buf = buf[n:]
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case reqModelName:
			sc.model = val
		case reqModelVersion:
			sc.version = val
		case reqID:
			sc.id = val
		case reqParameters:
			sc.parameters++
		case reqInputs:
			in, err := scanInput(val)
			if err != nil {
				return sc, err
			}
			sc.inputs++
			sc.dims += in.dims
			sc.parameters += in.parameters
			sc.bytesWire += in.bytesWire
			if !sc.exceeds && in.exceedsShape() {
				sc.over, sc.exceeds = in, true
			}
		case reqOutputs:
			params, err := countField(val, outputParameters)
			if err != nil {
				return sc, err
			}
			sc.outputs++
			sc.parameters += params
		case rawInputField:
			sc.raw++
		}
	}
	return sc, nil
}

// consumeField is the field at the start of b: its number and wire type,
// its value's bytes when it is length-delimited, and its whole length (<0:
// malformed).
func consumeField(b []byte) (protowire.Number, protowire.Type, []byte, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, n
	}
	if typ == protowire.BytesType {
		v, k := protowire.ConsumeBytes(b[n:])
		if k < 0 {
			return 0, 0, nil, k
		}
		return num, typ, v, n + k
	}
	k := protowire.ConsumeFieldValue(num, typ, b[n:])
	if k < 0 {
		return 0, 0, nil, k
	}
	return num, typ, nil, n + k
}

// countField counts the length-delimited entries of field number field in
// msg.
func countField(msg []byte, field protowire.Number) (int64, error) {
	var n int64
	for len(msg) > 0 {
		num, typ, _, k := consumeField(msg)
		if k < 0 {
			return 0, errMalformed
		}
		msg = msg[k:]
		if num == field && typ == protowire.BytesType {
			n++
		}
	}
	return n, nil
}

// scanInput walks an InferInputTensor. Its shape and its contents may come
// in several pieces, which protobuf appends (packed runs, single values,
// contents messages merged).
func scanInput(msg []byte) (inputScan, error) {
	in := inputScan{msg: msg, elems: 1}
	elemsDone := false
	for b := msg; len(b) > 0; {
		num, typ, val, n := consumeField(b)
		if n < 0 {
			return in, errMalformed
		}
		field := b[:n]
		b = b[n:]
		switch {
		case num == tensorName && typ == protowire.BytesType:
			in.name = val
		case num == tensorDatatype && typ == protowire.BytesType:
			in.datatype = val
		case num == tensorShape:
			if err := eachVarint(field, typ, val, func(v uint64) {
				in.addDim(int64(v), &elemsDone)
			}); err != nil {
				return in, err
			}
		case num == tensorParameters && typ == protowire.BytesType:
			in.parameters++
		case num == tensorContents && typ == protowire.BytesType:
			if err := in.scanContents(val); err != nil {
				return in, err
			}
		}
	}
	if in.dims == 0 {
		in.elems = 0
	}
	return in, nil
}

// addDim multiplies the element count by d as core.ElementCount does: the
// first dimension that is not positive makes it 0, a product past int64
// -1, and either ends the count.
func (in *inputScan) addDim(d int64, done *bool) {
	in.dims++
	if d < 0 {
		in.negative = true
	}
	switch {
	case *done:
	case d <= 0:
		in.elems, *done = 0, true
	case in.elems > math.MaxInt64/d:
		in.elems, *done = -1, true
	default:
		in.elems *= d
	}
}

// eachVarint calls f with each value of a repeated varint field's piece:
// packed (val) or one value (field, its tag and value).
func eachVarint(field []byte, typ protowire.Type, val []byte, f func(uint64)) error {
	switch typ {
	case protowire.BytesType:
		for len(val) > 0 {
			v, n := protowire.ConsumeVarint(val)
			if n < 0 {
				return errMalformed
			}
			f(v)
			val = val[n:]
		}
	case protowire.VarintType:
		_, _, n := protowire.ConsumeTag(field)
		v, _ := protowire.ConsumeVarint(field[n:])
		f(v)
	}
	return nil
}

// scanContents counts an InferTensorContents' entries into in.counts
// without reading their values: a packed run of varints holds as many as
// it has bytes below 0x80 (protobuf counts them so too), one of fixed32 or
// fixed64 values a quarter or an eighth of its length.
func (in *inputScan) scanContents(msg []byte) error {
	for len(msg) > 0 {
		num, typ, val, n := consumeField(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if num < 1 || num > contentsBytes {
			continue
		}
		switch {
		case num == contentsBytes && typ == protowire.BytesType:
			in.counts[num]++
			in.bytesLen += int64(len(val))
			in.bytesWire += int64(n)
		case num == contentsBytes:
		case typ == protowire.BytesType:
			k, err := packedCount(num, val)
			if err != nil {
				return err
			}
			in.counts[num] += k
		case num == contentsFP32 && typ == protowire.Fixed32Type,
			num == contentsFP64 && typ == protowire.Fixed64Type,
			num < contentsFP32 && typ == protowire.VarintType:
			in.counts[num]++
		}
	}
	return nil
}

// packedCount is the number of values in a packed run of field num.
func packedCount(num protowire.Number, val []byte) (int64, error) {
	size := 0
	switch num {
	case contentsFP32:
		size = 4
	case contentsFP64:
		size = 8
	}
	if size > 0 {
		if len(val)%size != 0 {
			return 0, errMalformed
		}
		return int64(len(val) / size), nil
	}
	if len(val) > 0 && val[len(val)-1] >= 0x80 {
		return 0, errMalformed // the last varint is cut short
	}
	var k int64
	for _, c := range val {
		if c < 0x80 {
			k++
		}
	}
	return k, nil
}

// largestCount is the most entries any one contents field holds.
func (in *inputScan) largestCount() int64 {
	var most int64
	for _, c := range in.counts {
		most = max(most, c)
	}
	return most
}

// exceedsShape reports whether the contents hold more elements than the
// shape declares, or any when the shape overflows: decoding them would
// allocate for elements the request is refused for.
func (in *inputScan) exceedsShape() bool {
	n := in.largestCount()
	return n > 0 && (in.elems < 0 || n > in.elems)
}

// shape decodes the tensor's shape, for an error message.
func (in *inputScan) shape() []int64 {
	shape := make([]int64, 0, in.dims)
	for b := in.msg; len(b) > 0; {
		num, typ, val, n := consumeField(b)
		if n < 0 {
			break
		}
		if num == tensorShape {
			_ = eachVarint(b[:n], typ, val, func(v uint64) { shape = append(shape, int64(v)) })
		}
		b = b[n:]
	}
	return shape
}

// contentsTypes maps each InferTensorContents field (index: field number)
// to the datatype whose elements it carries for an input of datatype dt:
// int and uint carry 8- and 16-bit integers too (triton-inference-server/server
// src/grpc/infer_handler.cc, InferGRPCToInput).
func contentsTypes(dt core.DataType) [contentsBytes + 1]core.DataType {
	intType, uintType := core.TypeInt32, core.TypeUint32
	if dt == core.TypeInt8 || dt == core.TypeInt16 {
		intType = dt
	}
	if dt == core.TypeUint8 || dt == core.TypeUint16 {
		uintType = dt
	}
	return [contentsBytes + 1]core.DataType{core.TypeInvalid,
		core.TypeBool, intType, core.TypeInt64, uintType, core.TypeUint64, core.TypeFP32, core.TypeFP64, core.TypeBytes}
}

// explicitTypeError is the conversion's refusal of a contents field that is
// not the one of the input's datatype.
func explicitTypeError(input, model string, field core.DataType, datatype string) error {
	return invalidArg("unexpected explicit tensor data for input tensor '%s' for model '%s' of type '%s', expected datatype '%s'", input, model, field, datatype)
}

// refusal is why a request whose input in holds more elements than its
// shape is refused, in the words the conversion or the core would use
// once it was decoded: a contents field of another datatype first, as the
// conversion checks it first, then the core's checks of the shape and of
// the element count (core/validate.go, checkByteSize).
func (in *inputScan) refusal(model, id string) error {
	name, datatype := string(in.name), string(in.datatype)
	dt := core.ParseDataType(datatype)
	types := contentsTypes(dt)
	for f := 1; f <= int(contentsBytes); f++ {
		if in.counts[f] > 0 && types[f] != dt {
			return explicitTypeError(name, model, types[f], datatype)
		}
	}
	pfx := core.RequestPrefix(id)
	switch {
	case in.negative:
		return invalidArg("%sAll input dimensions should be specified for input '%s' for model '%s', got %s", pfx, name, model, core.ShapeString(in.shape()))
	case in.elems < 0:
		return invalidArg("%sinvalid shape for input '%s': shape %s causes total element count to exceed maximum size of %d", pfx, name, core.ShapeString(in.shape()), int64(math.MaxInt64))
	}
	got := in.largestCount()
	if dt == core.TypeBytes {
		return invalidArg("%sexpected %d string elements for inference input '%s' for model '%s', got %d", pfx, in.elems, name, model, got)
	}
	size := int64(max(dt.ByteSize(), 1)) // dt is a fixed-size type here
	if in.elems > math.MaxInt64/size {
		return invalidArg("%sbyte size overflow for input '%s': element count %d times element size %d exceeds maximum size of %d", pfx, name, in.elems, size, int64(math.MaxInt64))
	}
	// got*size cannot overflow: got entries take at least a byte each.
	return invalidArg("%sinput byte size mismatch for input '%s' for model '%s'. Expected %d, got %d", pfx, name, model, in.elems*size, got*size)
}

// overBudget refuses a request whose entries would cost more to decode
// than its size allows (see inputCost); nil when it is within.
func (sc *requestScan) overBudget() error {
	cost := sc.inputs*inputCost + sc.outputs*outputCost + sc.parameters*parameterCost + sc.raw*rawCost + sc.dims*dimCost
	if cost <= 2*int64(sc.size)+entryAllowance {
		return nil
	}
	return invalidArg("%srequest of %d bytes has too many entries to decode: %d inputs, %d outputs, %d parameters, %d shape dimensions, %d raw_input_contents",
		core.RequestPrefix(string(sc.id)), sc.size, sc.inputs, sc.outputs, sc.parameters, sc.dims, sc.raw)
}
