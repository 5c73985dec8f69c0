package onnxrt

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
)

// Small tensors are not wrapped afresh each run: creating and destroying an
// OrtValue through onnxruntime_go costs several cgo calls and allocations,
// more than copying a few KiB. An instance keeps, per input and output slot,
// the tensors of the last few shapes it saw; a run copies its inputs in and
// its outputs out. Larger tensors keep the zero-copy path.

// smallTensorBytes is the largest tensor kept: up to here the copies cost
// less than creating an OrtValue.
const smallTensorBytes = 64 << 10

// cacheWays is how many shapes a slot keeps: enough for every batch size
// of a max_batch_size 8 model under dynamic batching, which otherwise
// cycles through more shapes than the cache holds and misses every time.
const cacheWays = 8

// cachedValue is a reusable ORT tensor of one shape. Its buffer is C memory:
// ORT holds on to it between runs, which Go memory could do only pinned, and
// a pinned buffer that is never unpinned makes the GC panic.
type cachedValue struct {
	shape  []int64
	buf    []byte
	val    ort.Value
	handle unsafe.Pointer // the OrtValue
}

// slotCache holds one slot's values, most recently used first.
type slotCache []*cachedValue

// valueCache holds an instance's reusable values; the instance lock guards it.
type valueCache struct {
	inputs, outputs []slotCache
}

// sameShape reports whether shape equals dims, with dims[0] read as first
// when first >= 0 (the batch size of a batched output).
func sameShape(shape, dims []int64, first int64) bool {
	if len(shape) != len(dims) {
		return false
	}
	for i, d := range dims {
		if i == 0 && first >= 0 {
			d = first
		}
		if shape[i] != d {
			return false
		}
	}
	return true
}

// get returns the slot's value of shape dims (dims[0] read as first when
// first >= 0) and n bytes, creating it, and evicting the least recently used
// one, on a miss.
func (c *slotCache) get(dims []int64, first, n int64, onnx ort.TensorElementDataType) (*cachedValue, error) {
	s := *c
	for k, v := range s {
		if sameShape(v.shape, dims, first) {
			copy(s[1:k+1], s[:k])
			s[0] = v
			return v, nil
		}
	}
	v, err := newCachedValue(dims, first, n, onnx)
	if err != nil {
		return nil, err
	}
	if len(s) == cacheWays {
		s[len(s)-1].free()
		s = s[:len(s)-1]
	}
	s = append(s, nil)
	copy(s[1:], s)
	s[0] = v
	*c = s
	return v, nil
}

func newCachedValue(dims []int64, first, n int64, onnx ort.TensorElementDataType) (*cachedValue, error) {
	shape := append([]int64(nil), dims...)
	if first >= 0 {
		shape[0] = first
	}
	p := C.malloc(C.size_t(n)) // cgo's malloc never returns nil
	v := &cachedValue{shape: shape, buf: unsafe.Slice((*byte)(p), n)}
	val, err := ort.NewCustomDataTensor(ort.Shape(shape), v.buf, onnx)
	if err != nil {
		C.free(p)
		return nil, err
	}
	v.val = tracked(val)
	if v.handle, err = valueHandle(val); err != nil {
		v.free()
		return nil, err
	}
	return v, nil
}

func (v *cachedValue) free() {
	destroy(v.val)
	C.free(unsafe.Pointer(&v.buf[0]))
	v.val, v.buf = nil, nil
}

// cachedInput returns the cached value for input i holding a copy of t, or
// nil where t is not a small fixed-size tensor (or is malformed: newInput
// reports that).
func (in *instance) cachedInput(i int, t *core.Tensor) (*cachedValue, error) {
	s := &in.inputs[i]
	if s.scalar || t.DataType != s.dtype || t.DataType == core.TypeBytes {
		return nil, nil
	}
	n := core.ElementCount(t.Shape) * int64(t.DataType.ByteSize())
	if n <= 0 || n > smallTensorBytes || int64(len(t.Data)) < n {
		return nil, nil
	}
	v, err := in.cache.inputs[i].get(t.Shape, -1, n, s.onnx)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "input '%s': %v", s.name, err)
	}
	copy(v.buf, t.Data[:n])
	return v, nil
}

// cachedOutput returns the cached value for output i at the given batch
// size, or nil where the output is not small.
func (in *instance) cachedOutput(i int, batch int64) (*cachedValue, error) {
	s := &in.outputs[i]
	first := int64(-1)
	if s.batched {
		first = batch
	}
	n := int64(s.dtype.ByteSize())
	for k, d := range s.dims {
		if k == 0 && first >= 0 {
			d = first
		}
		if d <= 0 || n > smallTensorBytes/d {
			return nil, nil
		}
		n *= d
	}
	v, err := in.cache.outputs[i].get(s.dims, first, n, s.onnx)
	if err != nil {
		shape := append([]int64(nil), s.dims...)
		if first >= 0 {
			shape[0] = first
		}
		return nil, core.Errorf(core.CodeInternal, "output '%s' of shape %s: %v", s.name, core.ShapeString(shape), err)
	}
	return v, nil
}

// free destroys every cached value.
func (c *valueCache) free() {
	for _, slots := range [][]slotCache{c.inputs, c.outputs} {
		for i, s := range slots {
			for _, v := range s {
				v.free()
			}
			slots[i] = nil
		}
	}
}
