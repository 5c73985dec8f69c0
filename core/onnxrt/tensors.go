package onnxrt

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
)

// liveValues counts the ORT values this package holds; tests check that it
// drops back to zero, i.e. that every value created is destroyed.
var liveValues atomic.Int64

func tracked(v ort.Value) ort.Value {
	if v != nil {
		liveValues.Add(1)
	}
	return v
}

func destroy(v ort.Value) {
	if v != nil {
		_ = v.Destroy()
		liveValues.Add(-1)
	}
}

// oneByte backs zero-element tensors: ORT needs no data for them, but
// NewCustomDataTensor refuses an empty slice. ORT never writes through an
// input, and a zero-element output has nothing to write.
var oneByte [1]byte

// newInput wraps a request tensor as an ORT value, without copying for
// fixed-size types: ORT reads the tensor's own bytes, pinned with pins.
func newInput(s *inputSlot, t *core.Tensor, pins *runtime.Pinner) (ort.Value, error) {
	if t.DataType != s.dtype {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' has datatype %s, model expects %s", s.name, t.DataType, s.dtype)
	}
	if s.scalar {
		return newScalarInput(s, t)
	}
	if t.DataType == core.TypeBytes {
		return newStringInput(s, t)
	}
	n := core.ElementCount(t.Shape) * int64(t.DataType.ByteSize())
	if len(t.Shape) == 0 || n < 0 || int64(len(t.Data)) < n {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' holds %d bytes, shape %s of %s needs %d", s.name, len(t.Data), core.ShapeString(t.Shape), t.DataType, n)
	}
	data := t.Data[:n]
	if n == 0 {
		data = oneByte[:]
	} else {
		pins.Pin(&data[0])
	}
	v, err := ort.NewCustomDataTensor(ort.Shape(t.Shape), data, s.onnx)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "input '%s': %v", s.name, err)
	}
	return tracked(v), nil
}

func newStringInput(s *inputSlot, t *core.Tensor) (ort.Value, error) {
	elems, err := core.BytesElements(t.Data)
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s': %v", s.name, err)
	}
	if want := core.ElementCount(t.Shape); len(t.Shape) == 0 || int64(len(elems)) != want {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' holds %d strings, shape %s needs %d", s.name, len(elems), core.ShapeString(t.Shape), want)
	}
	strs := make([]string, len(elems))
	for i, e := range elems {
		strs[i] = string(e)
	}
	st, err := ort.NewStringTensor(ort.Shape(t.Shape))
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "input '%s': %v", s.name, err)
	}
	tracked(st)
	if err := st.SetContents(strs); err != nil {
		destroy(st)
		return nil, core.Errorf(core.CodeInternal, "input '%s': %v", s.name, err)
	}
	return st, nil
}

// scalarCapable lists the types onnxruntime_go can make rank-0 tensors of
// (its Scalar type); NewCustomDataTensor and NewStringTensor insist on at
// least one dimension.
func scalarCapable(d core.DataType) bool {
	switch d {
	case core.TypeBytes, core.TypeFP16, core.TypeBF16, core.TypeInvalid:
		return false
	}
	return d.Valid()
}

// newScalarInput passes the one element of a request's [1] (or [B=1])
// tensor to a rank-0 graph input, as Triton does.
func newScalarInput(s *inputSlot, t *core.Tensor) (ort.Value, error) {
	if core.ElementCount(t.Shape) != 1 || len(t.Data) < t.DataType.ByteSize() {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' feeds a scalar and must hold one element, got shape %s", s.name, core.ShapeString(t.Shape))
	}
	var (
		v   ort.Value
		err error
	)
	switch t.DataType {
	case core.TypeBool:
		v, err = ort.NewScalar(t.Data[0] != 0)
	case core.TypeUint8:
		v, err = ort.NewScalar(t.Data[0])
	case core.TypeInt8:
		v, err = ort.NewScalar(int8(t.Data[0]))
	case core.TypeUint16:
		v, err = ort.NewScalar(binary.LittleEndian.Uint16(t.Data))
	case core.TypeInt16:
		v, err = ort.NewScalar(int16(binary.LittleEndian.Uint16(t.Data)))
	case core.TypeUint32:
		v, err = ort.NewScalar(binary.LittleEndian.Uint32(t.Data))
	case core.TypeInt32:
		v, err = ort.NewScalar(int32(binary.LittleEndian.Uint32(t.Data)))
	case core.TypeUint64:
		v, err = ort.NewScalar(binary.LittleEndian.Uint64(t.Data))
	case core.TypeInt64:
		v, err = ort.NewScalar(int64(binary.LittleEndian.Uint64(t.Data)))
	case core.TypeFP32:
		v, err = ort.NewScalar(math.Float32frombits(binary.LittleEndian.Uint32(t.Data)))
	case core.TypeFP64:
		v, err = ort.NewScalar(math.Float64frombits(binary.LittleEndian.Uint64(t.Data)))
	default:
		return nil, core.Errorf(core.CodeUnsupported, "scalar %s input '%s' is not supported", t.DataType, s.name)
	}
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "input '%s': %v", s.name, err)
	}
	return tracked(v), nil
}

// newScalarOutput pre-allocates a rank-0 output; ORT cannot hand one back
// through onnxruntime_go's auto-allocation (its Tensor refuses rank 0).
func newScalarOutput(d core.DataType) (ort.Value, error) {
	var (
		v   ort.Value
		err error
	)
	switch d {
	case core.TypeBool:
		v, err = ort.NewEmptyScalar[bool]()
	case core.TypeUint8:
		v, err = ort.NewEmptyScalar[uint8]()
	case core.TypeInt8:
		v, err = ort.NewEmptyScalar[int8]()
	case core.TypeUint16:
		v, err = ort.NewEmptyScalar[uint16]()
	case core.TypeInt16:
		v, err = ort.NewEmptyScalar[int16]()
	case core.TypeUint32:
		v, err = ort.NewEmptyScalar[uint32]()
	case core.TypeInt32:
		v, err = ort.NewEmptyScalar[int32]()
	case core.TypeUint64:
		v, err = ort.NewEmptyScalar[uint64]()
	case core.TypeInt64:
		v, err = ort.NewEmptyScalar[int64]()
	case core.TypeFP32:
		v, err = ort.NewEmptyScalar[float32]()
	case core.TypeFP64:
		v, err = ort.NewEmptyScalar[float64]()
	default:
		return nil, fmt.Errorf("no scalar of %s", d)
	}
	if err != nil {
		return nil, err
	}
	return tracked(v), nil
}

// scalarBytes reads back a pre-allocated scalar output.
func scalarBytes(v ort.Value) ([]byte, error) {
	switch s := v.(type) {
	case *ort.Scalar[bool]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[uint8]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[int8]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[uint16]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[int16]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[uint32]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[int32]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[uint64]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[int64]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[float32]:
		return valueBytes(s.GetData()), nil
	case *ort.Scalar[float64]:
		return valueBytes(s.GetData()), nil
	}
	return nil, fmt.Errorf("unexpected scalar value %T", v)
}

// valueBytes returns the in-memory (little-endian) bytes of one element.
func valueBytes[T ort.TensorData](x T) []byte {
	b := make([]byte, unsafe.Sizeof(x))
	*(*T)(unsafe.Pointer(&b[0])) = x
	return b
}

// sliceBytes views a Go slice of elements as bytes, without copying.
func sliceBytes[T ort.TensorData](d []T) []byte {
	if len(d) == 0 {
		return []byte{}
	}
	var x T
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), len(d)*int(unsafe.Sizeof(x)))
}

// tensorBytes returns the data of an output ORT allocated (onnxruntime_go
// has already copied it into Go memory, which stays valid after Destroy).
func tensorBytes(v ort.Value) ([]byte, error) {
	switch t := v.(type) {
	case *ort.Tensor[bool]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[uint8]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[int8]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[uint16]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[int16]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[uint32]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[int32]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[uint64]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[int64]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[float32]:
		return sliceBytes(t.GetData()), nil
	case *ort.Tensor[float64]:
		return sliceBytes(t.GetData()), nil
	}
	return nil, fmt.Errorf("unexpected output value %T", v)
}

// stringBytes serializes a STRING output in the BYTES wire layout.
func stringBytes(t *ort.StringTensor, scalar bool) ([]byte, error) {
	var strs []string
	if scalar {
		// GetContents sizes by the shape's element count, 0 for a scalar.
		s, err := t.GetElement(0)
		if err != nil {
			return nil, err
		}
		strs = []string{s}
	} else {
		var err error
		if strs, err = t.GetContents(); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, s := range strs {
		n += 4 + len(s)
	}
	out := make([]byte, 0, n)
	for _, s := range strs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return out, nil
}
