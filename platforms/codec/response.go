package codec

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// EncodeResponse renders resp as Triton does (InferRequestClass::
// FinalizeResponse in triton-inference-server/server src/http_server.cc;
// framing as in its docs/protocol/extension_binary_data.md): the
// JSON header and, in header order, the blobs of the BINARY outputs that
// have data. binary reports whether any blob exists, which selects
// Content-Type application/octet-stream and Inference-Header-Content-Length
// (the header length). req decides each output's kind; nil means JSON.
// Blobs alias the output tensors' data. An output in shared memory is
// copied into its region and described in the header without data; a
// region too small for its output fails the whole response.
func EncodeResponse(resp *core.InferResponse, req *Envelope) (header []byte, blobs [][]byte, binary bool, err error) {
	header, blobs, err = AppendResponse(nil, resp, req)
	return header, blobs, len(blobs) > 0, err
}

// AppendResponse is EncodeResponse appending the header to dst (a reused
// buffer, or nil), which it first grows to the header's likely size.
func AppendResponse(dst []byte, resp *core.InferResponse, req *Envelope) (header []byte, blobs [][]byte, err error) {
	if req != nil && req.spans != nil {
		if err := protocol.WriteRegions(resp.Outputs, req.outputSpan); err != nil {
			return nil, nil, err
		}
	}
	b := append(slices.Grow(dst, estimateResponse(resp, req)), '{')
	if resp.ID != "" {
		b = append(b, `"id":`...)
		b = tritonjson.AppendString(b, resp.ID)
		b = append(b, ',')
	}
	b = append(b, `"model_name":`...)
	b = tritonjson.AppendString(b, resp.ModelName)
	b = append(b, `,"model_version":"`...)
	b = strconv.AppendInt(b, resp.ModelVersion, 10)
	b = append(b, '"')
	if len(resp.Parameters) > 0 {
		if b, err = appendParameters(append(b, `,"parameters":`...), resp.Parameters); err != nil {
			return nil, nil, err
		}
	}
	b = append(b, `,"outputs":[`...)
	for i, t := range resp.Outputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, t.Name)
		b = append(b, `,"datatype":`...)
		b = tritonjson.AppendString(b, t.DataType.String())
		b = append(b, `,"shape":[`...)
		for j, dim := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(dim), 10)
		}
		b = append(b, ']')
		switch req.OutputKind(t.Name) {
		case OutputBinary:
			b = append(b, `,"parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(len(t.Data)), 10)
			b = append(b, '}')
			if len(t.Data) > 0 {
				blobs = append(blobs, t.Data)
			}
		case OutputJSON:
			if b, err = appendTensorData(append(b, `,"data":`...), t); err != nil {
				return nil, nil, err
			}
		case OutputSharedMemory:
			// Name, datatype and shape only, as Triton's FinalizeResponse.
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return b, blobs, nil
}

// appendParameters writes the response parameters. A Go map has no order, so
// keys are sorted to keep the output stable.
func appendParameters(b []byte, params map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = tritonjson.AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = AppendParameterValue(b, k, params[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// AppendParameterValue writes the JSON value of response parameter name,
// as protocol.ResponseParam reads it (with its errors).
func AppendParameterValue(b []byte, name string, v any) ([]byte, error) {
	p, err := protocol.ResponseParam(name, v)
	if err != nil {
		return nil, err
	}
	switch p.Kind {
	case protocol.ParamBool:
		return tritonjson.AppendBool(b, p.Bool), nil
	case protocol.ParamString:
		return tritonjson.AppendString(b, p.String), nil
	case protocol.ParamInt64:
		return tritonjson.AppendInt(b, p.Int64), nil
	case protocol.ParamUint64:
		return tritonjson.AppendUint(b, p.Uint64), nil
	}
	return tritonjson.AppendFloat(b, p.Double), nil
}

// responseElements is Triton's element count for an output: the product of
// the dimensions, 1 for a shape of []. ok is false when it cannot describe
// any tensor (negative dimension or overflow).
func responseElements(shape []int64) (n uint64, ok bool) {
	n = 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

func errOutputSize(name string) error {
	return core.Errorf(core.CodeInternal, "output tensor shape does not match size of output for '%s'", name)
}

// appendTensorData writes an output's flat "data" array (Triton's
// WriteDataToJson in triton-inference-server/server src/http_server.cc).
func appendTensorData(b []byte, t *core.Tensor) ([]byte, error) {
	switch t.DataType {
	case core.TypeFP16, core.TypeBF16:
		return nil, invalidArg("sending " + t.DataType.String() + " data via JSON is not supported. Please use the binary data format for output")
	case core.TypeInvalid:
		return nil, invalidArg("Invalid data type for output tensor")
	}
	count, ok := responseElements(t.Shape)
	if !ok {
		return nil, errOutputSize(t.Name)
	}
	data := t.Data
	if t.DataType != core.TypeBytes && (count > uint64(len(data)) || count*uint64(t.DataType.ByteSize()) != uint64(len(data))) {
		return nil, errOutputSize(t.Name)
	}
	le := binary.LittleEndian
	b = append(b, '[')
	n := int(count)
	switch t.DataType {
	case core.TypeBool:
		for i := 0; i < n; i++ {
			b = tritonjson.AppendBool(b, data[i] != 0)
			b = append(b, ',')
		}
	case core.TypeUint8:
		for i := 0; i < n; i++ {
			b = strconv.AppendUint(b, uint64(data[i]), 10)
			b = append(b, ',')
		}
	case core.TypeUint16:
		for i := 0; i < n; i++ {
			b = strconv.AppendUint(b, uint64(le.Uint16(data[2*i:])), 10)
			b = append(b, ',')
		}
	case core.TypeUint32:
		for i := 0; i < n; i++ {
			b = strconv.AppendUint(b, uint64(le.Uint32(data[4*i:])), 10)
			b = append(b, ',')
		}
	case core.TypeUint64:
		for i := 0; i < n; i++ {
			b = strconv.AppendUint(b, le.Uint64(data[8*i:]), 10)
			b = append(b, ',')
		}
	case core.TypeInt8:
		for i := 0; i < n; i++ {
			b = strconv.AppendInt(b, int64(int8(data[i])), 10)
			b = append(b, ',')
		}
	case core.TypeInt16:
		for i := 0; i < n; i++ {
			b = strconv.AppendInt(b, int64(int16(le.Uint16(data[2*i:]))), 10)
			b = append(b, ',')
		}
	case core.TypeInt32:
		for i := 0; i < n; i++ {
			b = strconv.AppendInt(b, int64(int32(le.Uint32(data[4*i:]))), 10)
			b = append(b, ',')
		}
	case core.TypeInt64:
		for i := 0; i < n; i++ {
			b = strconv.AppendInt(b, int64(le.Uint64(data[8*i:])), 10)
			b = append(b, ',')
		}
	case core.TypeFP32:
		for i := 0; i < n; i++ {
			b = tritonjson.AppendFloat32(b, math.Float32frombits(le.Uint32(data[4*i:])))
			b = append(b, ',')
		}
	case core.TypeFP64:
		for i := 0; i < n; i++ {
			b = tritonjson.AppendFloat(b, math.Float64frombits(le.Uint64(data[8*i:])))
			b = append(b, ',')
		}
	case core.TypeBytes:
		off := 0
		for i := 0; i < n; i++ {
			if len(data)-off < 4 {
				return nil, errOutputSize(t.Name)
			}
			l := int(le.Uint32(data[off:]))
			off += 4
			if l > len(data)-off {
				return nil, errOutputSize(t.Name)
			}
			b = tritonjson.AppendStringBytes(b, data[off:off+l])
			b = append(b, ',')
			off += l
		}
	}
	if n > 0 {
		b = b[:len(b)-1] // the last comma
	}
	return append(b, ']'), nil
}

// estimateResponse sizes the header buffer so that encoding usually grows it
// at most once.
func estimateResponse(resp *core.InferResponse, req *Envelope) int {
	n := 96 + len(resp.ID) + len(resp.ModelName) + 32*len(resp.Parameters)
	for _, t := range resp.Outputs {
		n += 80 + len(t.Name) + 21*len(t.Shape)
		if req.OutputKind(t.Name) != OutputJSON {
			continue
		}
		switch t.DataType {
		case core.TypeFP32, core.TypeFP64:
			n += len(t.Data) / t.DataType.ByteSize() * 24
		case core.TypeBytes:
			n += len(t.Data) + len(t.Data)/4
		case core.TypeBool:
			n += len(t.Data) * 6
		default:
			if s := t.DataType.ByteSize(); s > 0 {
				n += len(t.Data) / s * (3*s + 2)
			}
		}
	}
	return n
}
