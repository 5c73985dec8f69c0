package codec

import (
	"context"
	"encoding/binary"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// The generate extension (triton-inference-server/server
// docs/protocol/extension_generate.md) maps flat JSON members to
// tensors and back; these helpers reuse the infer codec's element rules.

// GenerateTensorData converts a generate input value, a JSON scalar or a
// flat array, to the bytes of a dt tensor. It returns the element count E
// (1 for a scalar, the array length otherwise); element conversion and its
// errors are those of an infer request's "data". Size limits are the
// caller's: the result is at most a small multiple of the JSON text.
func GenerateTensorData(name string, dt core.DataType, v tritonjson.Value) (data []byte, count int64, err error) {
	if dt != core.TypeBytes && dt.ByteSize() == 0 {
		return nil, 0, invalidArg("invalid datatype for input " + name)
	}
	if v.IsArray() {
		var d decoder
		count = int64(v.Len())
		// The generate route bounds the work by its body's size; it has
		// no context to give here.
		data, err = d.jsonTensor(context.Background(), name, dt, count, v)
		return data, count, err
	}
	switch dt {
	case core.TypeBytes:
		s, err := v.StringBytes()
		if err != nil {
			return nil, 0, wrap("Unable to parse JSON bytes array", err)
		}
		return core.AppendBytesElement(make([]byte, 0, 4+len(s)), s), 1, nil
	case core.TypeFP16, core.TypeBF16:
		return nil, 0, invalidArg("receiving " + dt.String() + " data via JSON is not supported. Please use the binary data format for input " + name)
	}
	if !v.Exists() {
		return nil, 0, wrap("Unable to parse 'data'", internal(tritonjson.MsgNonNumber))
	}
	bits, err := elementBits(v, dt)
	if err != nil {
		return nil, 0, wrap("Unable to parse 'data'", err)
	}
	le := binary.LittleEndian
	switch dt.ByteSize() {
	case 1:
		return []byte{byte(bits)}, 1, nil
	case 2:
		return le.AppendUint16(nil, uint16(bits)), 1, nil
	case 4:
		return le.AppendUint32(nil, uint32(bits)), 1, nil
	}
	return le.AppendUint64(nil, bits), 1, nil
}

// AppendGenerateValue appends output t as a generate response member's
// value: a 1-element tensor as a bare scalar (BYTES as a string), any other
// as a flat array (ExactMappingOutput in triton-inference-server/server
// src/http_server.cc). FP16 and BF16 outputs fail as in infer's JSON.
func AppendGenerateValue(b []byte, t *core.Tensor) ([]byte, error) {
	start := len(b)
	b, err := appendTensorData(b, t)
	if err != nil {
		return nil, err
	}
	if n, _ := responseElements(t.Shape); n == 1 && len(b)-start >= 2 {
		// Drop the brackets of the one-element array.
		copy(b[start:], b[start+1:len(b)-1])
		b = b[:len(b)-2]
	}
	return b, nil
}
