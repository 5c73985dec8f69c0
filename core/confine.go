package core

import (
	"github.com/inferd/inferd/repo/modelfile"
)

// MaxConfigAlloc bounds one buffer a model configuration asks for: a
// sequence state's initial or zero data, a warmup sample
// (modelfile.MaxAllocBytes; docs/repositories.md, "Paths a config may
// name").
const MaxConfigAlloc = modelfile.MaxAllocBytes

// ConfigBytes is the size of a tensor of dims and type dt that the server
// would build from a config (a BYTES element counts its 4-byte length
// prefix, as in zero data), or false when the product of dims overflows
// or passes MaxConfigAlloc: the caller refuses the config instead of
// attempting the allocation.
func ConfigBytes(dims []int64, dt DataType) (int64, bool) {
	n := ElementCount(dims)
	elem := int64(4)
	if dt != TypeBytes {
		elem = int64(dt.ByteSize())
	}
	if n < 0 || (elem > 0 && n > MaxConfigAlloc/elem) {
		return 0, false
	}
	return n * elem, true
}

// FileError is a failure to use a file a config field names, with the
// field and the path in its message, as INVALID_ARG.
func FileError(field, path string, err error) *Error {
	return Errorf(CodeInvalidArg, "%v", &modelfile.FieldError{Field: field, Path: path, Err: err})
}
