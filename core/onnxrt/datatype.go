package onnxrt

import (
	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// onnxOf maps inferd element types to ONNX ones, indexed by core.DataType.
var onnxOf = [...]ort.TensorElementDataType{
	core.TypeInvalid: ort.TensorElementDataTypeUndefined,
	core.TypeBool:    ort.TensorElementDataTypeBool,
	core.TypeUint8:   ort.TensorElementDataTypeUint8,
	core.TypeUint16:  ort.TensorElementDataTypeUint16,
	core.TypeUint32:  ort.TensorElementDataTypeUint32,
	core.TypeUint64:  ort.TensorElementDataTypeUint64,
	core.TypeInt8:    ort.TensorElementDataTypeInt8,
	core.TypeInt16:   ort.TensorElementDataTypeInt16,
	core.TypeInt32:   ort.TensorElementDataTypeInt32,
	core.TypeInt64:   ort.TensorElementDataTypeInt64,
	core.TypeFP16:    ort.TensorElementDataTypeFloat16,
	core.TypeFP32:    ort.TensorElementDataTypeFloat,
	core.TypeFP64:    ort.TensorElementDataTypeDouble,
	core.TypeBytes:   ort.TensorElementDataTypeString,
	core.TypeBF16:    ort.TensorElementDataTypeBFloat16,
}

// toONNX returns the ONNX element type of d, Undefined for TypeInvalid or an
// out-of-range value.
func toONNX(d core.DataType) ort.TensorElementDataType {
	if d < 0 || int(d) >= len(onnxOf) {
		return ort.TensorElementDataTypeUndefined
	}
	return onnxOf[d]
}

// fromONNX returns the inferd type of an ONNX element type, TypeInvalid for
// the ones inferd cannot serve (complex, 8-bit floats, 4-bit integers).
func fromONNX(t ort.TensorElementDataType) core.DataType {
	for d, o := range onnxOf {
		if d != int(core.TypeInvalid) && o == t {
			return core.DataType(d)
		}
	}
	return core.TypeInvalid
}

// configType converts a config data_type; the enums share numbering.
func configType(d modelconfig.DataType) core.DataType { return core.DataType(d) }

// configName is how Triton's messages name a type (TYPE_FP32, TYPE_STRING).
func configName(d core.DataType) string { return d.ConfigName() }
