// Package core is the v2 inference core: datatypes and tensors, requests and
// responses, validation against the model configuration, the model registry
// and lifecycle (load, reload, unload, poll, warmup), and the seam
// (seam.go) through which the schedulers run: core/dynamic's default
// scheduler and dynamic batcher, core/sequence's sequence batcher and
// core/ensemble's ensemble scheduler; statistics and
// load figures, trace hooks and the backend interface that core/onnxrt and
// core/python implement. It knows nothing of HTTP or gRPC: the frontends reach it
// through platforms/protocol and platforms/infer (see docs/architecture.md).
//
// One inference takes these shapes on its way through, named as in the
// glossary of docs/architecture.md: an InferRequest (what a caller hands
// the core, as the client sent it) is validated into an ExecRequest (as a
// backend sees it, carried by the scheduler's job); the ExecRequests one
// instance runs at once are an Execution, which a tensor backend (ONNX
// Runtime) receives concatenated into one ConcatBatch; the backend answers
// each ExecRequest with ExecResponses, and the core turns each into an
// InferResponse for the caller.
package core

import "strings"

// DataType is a tensor element type. The numeric values equal Triton's
// model_config.proto DataType enum (TYPE_BOOL = 1 ... TYPE_BF16 = 14), so a
// config data_type converts with a plain cast.
type DataType int32

// Element types, numbered as in model_config.proto.
const (
	TypeInvalid DataType = 0
	TypeBool    DataType = 1
	TypeUint8   DataType = 2
	TypeUint16  DataType = 3
	TypeUint32  DataType = 4
	TypeUint64  DataType = 5
	TypeInt8    DataType = 6
	TypeInt16   DataType = 7
	TypeInt32   DataType = 8
	TypeInt64   DataType = 9
	TypeFP16    DataType = 10
	TypeFP32    DataType = 11
	TypeFP64    DataType = 12
	TypeBytes   DataType = 13 // TYPE_STRING in configs, BYTES on the wire
	TypeBF16    DataType = 14
)

var protocolNames = [...]string{
	TypeInvalid: "INVALID",
	TypeBool:    "BOOL",
	TypeUint8:   "UINT8",
	TypeUint16:  "UINT16",
	TypeUint32:  "UINT32",
	TypeUint64:  "UINT64",
	TypeInt8:    "INT8",
	TypeInt16:   "INT16",
	TypeInt32:   "INT32",
	TypeInt64:   "INT64",
	TypeFP16:    "FP16",
	TypeFP32:    "FP32",
	TypeFP64:    "FP64",
	TypeBytes:   "BYTES",
	TypeBF16:    "BF16",
}

var byteSizes = [...]int{
	TypeBool: 1, TypeUint8: 1, TypeUint16: 2, TypeUint32: 4, TypeUint64: 8,
	TypeInt8: 1, TypeInt16: 2, TypeInt32: 4, TypeInt64: 8,
	TypeFP16: 2, TypeFP32: 4, TypeFP64: 8, TypeBytes: 0, TypeBF16: 2,
}

// String returns the protocol name (INT32, FP32, BYTES, ...).
func (d DataType) String() string {
	if d < 0 || int(d) >= len(protocolNames) {
		return "INVALID"
	}
	return protocolNames[d]
}

// ConfigName returns the model-config enum name (TYPE_INT32, TYPE_STRING, ...).
func (d DataType) ConfigName() string {
	switch {
	case d == TypeBytes:
		return "TYPE_STRING"
	case d <= TypeInvalid || int(d) >= len(protocolNames):
		return "TYPE_INVALID"
	}
	return "TYPE_" + protocolNames[d]
}

// ByteSize is the size of one element; 0 for BYTES (variable) and INVALID.
func (d DataType) ByteSize() int {
	if d <= 0 || int(d) >= len(byteSizes) {
		return 0
	}
	return byteSizes[d]
}

// Valid reports whether d names a real element type.
func (d DataType) Valid() bool { return d > TypeInvalid && int(d) < len(protocolNames) }

// ParseDataType maps a protocol name (case-sensitive, as Triton) to a DataType.
func ParseDataType(s string) DataType {
	for i, n := range protocolNames {
		if i != 0 && n == s {
			return DataType(i)
		}
	}
	return TypeInvalid
}

// ParseConfigDataType maps TYPE_* names to a DataType.
func ParseConfigDataType(s string) DataType {
	if s == "TYPE_STRING" {
		return TypeBytes
	}
	if name, ok := strings.CutPrefix(s, "TYPE_"); ok && name != "BYTES" {
		return ParseDataType(name)
	}
	return TypeInvalid
}
