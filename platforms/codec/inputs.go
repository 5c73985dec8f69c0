package codec

import (
	"bytes"
	"context"
	"math"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// The inputs of an infer request's JSON header and their data.

// inputs decodes the "inputs" array in order.
func (d *decoder) inputs(ctx context.Context, root tritonjson.Value) error {
	arr, err := root.MemberArray("inputs")
	if err != nil {
		return wrap("Unable to parse 'inputs'", err)
	}
	n := arr.Len()
	if n == 0 {
		return nil
	}
	// One allocation for the tensors and one for all shapes.
	dims := 0
	for _, in := range arr.Elements() {
		if s, ok := in.Find("shape"); ok {
			dims += s.Len()
		}
	}
	tensors := make([]core.Tensor, n)
	ptrs := make([]*core.Tensor, 0, n)
	shapes := make([]int64, 0, dims)
	req := d.r.Request
	var names protocol.Names
	for i, in := range arr.Elements() {
		if err := alive(ctx, i); err != nil {
			return err
		}
		t := &tensors[i]
		if err := d.input(ctx, in, t, &shapes, &names); err != nil {
			return err
		}
		ptrs = append(ptrs, t)
	}
	req.Inputs = ptrs
	return nil
}

// input decodes one input object into t. names holds the input names decoded so
// far (for the duplicate-name check).
func (d *decoder) input(ctx context.Context, in tritonjson.Value, t *core.Tensor, shapes *[]int64, names *protocol.Names) error {
	// Exactly one of data / binary_data_size / shared_memory_region.
	hasData := in.Has("data")
	params, hasParams := in.Find("parameters")
	hasBinary := hasParams && params.Has("binary_data_size")
	hasSHM := hasParams && params.Has("shared_memory_region")
	if set := b2i(hasData) + b2i(hasBinary) + b2i(hasSHM); set != 1 {
		msg := "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But"
		if set == 0 {
			msg += " no field is set"
		} else {
			msg += " set"
			if hasData {
				msg += " 'data'"
			}
			if hasBinary {
				msg += " 'binary_data_size'"
			}
			if hasSHM {
				msg += " 'shared_memory_region'"
			}
		}
		return invalidArg(msg)
	}

	name, err := in.MemberString("name")
	if err != nil {
		return wrap("Unable to parse 'name'", err)
	}
	t.Name = cstring(name)
	dt, err := in.MemberString("datatype")
	if err != nil {
		return wrap("Unable to parse 'datatype'", err)
	}
	t.DataType = parseDataType(dt)
	shape, err := in.MemberArray("shape")
	if err != nil {
		return wrap("Unable to parse 'shape'", err)
	}
	start := len(*shapes)
	for _, e := range shape.Elements() {
		u, err := e.Uint64()
		if err != nil {
			return wrap("Unable to parse 'shape'", err)
		}
		*shapes = append(*shapes, int64(u))
	}
	t.Shape = (*shapes)[start:len(*shapes):len(*shapes)]
	if names.Add(t.Name) {
		return protocol.DuplicateInput(d.r.Request.ID, t.Name)
	}

	if hasBinary {
		v, _ := params.Find("binary_data_size")
		size, err := v.Uint64()
		if err != nil {
			return wrap("Unable to parse 'binary_data_size'", err)
		}
		if rem := uint64(len(d.body) - d.off); size > rem {
			return invalidArg("unexpected size for input '" + t.Name + "', expecting " +
				strconv.FormatUint(size-rem, 10) + " additional bytes for model '" + d.model + "'")
		}
		end := d.off + int(size)
		t.Data = d.body[d.off:end:end]
		d.off = end
		return d.checkBinarySize(t)
	}
	if hasSHM {
		// In place, held until the call ends, or copied out
		// (shm.Manager.InputTensor). The core checks the size against the
		// shape, as Triton's does.
		ref, err := parseSharedMemory(params)
		if err != nil {
			return err
		}
		held, err := d.regions.InputTensor(t, ref.Region, ref.Offset, ref.ByteSize)
		if held != nil {
			d.r.Holds.AddInput(held)
		}
		return err
	}

	count := core.ElementCount(t.Shape)
	if count < 0 {
		return shapeOverflowError(t)
	}
	if count == 0 {
		t.Data = []byte{}
		return nil
	}
	data, err := in.MemberArray("data")
	if err != nil {
		return wrap("Unable to parse 'data'", err)
	}
	t.Data, err = d.jsonTensor(ctx, t.Name, t.DataType, count, data)
	return err
}

// parseDataType maps a protocol datatype name; Triton reads it as a C
// string, so anything after a NUL is ignored.
func parseDataType(b []byte) core.DataType {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	// Compare without converting, so the hot path does not allocate.
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		if string(b) == dt.String() {
			return dt
		}
	}
	return core.TypeInvalid
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func shapeOverflowError(t *core.Tensor) error {
	return invalidArg("invalid shape for input '" + t.Name + "': shape " + core.ShapeString(t.Shape) +
		" causes total element count to exceed maximum size of " + strconv.FormatInt(math.MaxInt64, 10))
}

// checkBinarySize rejects binary data whose size disagrees with the shape,
// with the core's message, so that every decoded fixed-size tensor is
// consistent. BYTES and unknown datatypes are left to the core.
func (d *decoder) checkBinarySize(t *core.Tensor) error {
	size := t.DataType.ByteSize()
	if size == 0 {
		return nil
	}
	count := core.ElementCount(t.Shape)
	if count < 0 {
		return shapeOverflowError(t)
	}
	if count > math.MaxInt64/int64(size) {
		return byteSizeOverflowError(t.Name, count, size)
	}
	if want := count * int64(size); want != int64(len(t.Data)) {
		return invalidArg(core.RequestPrefix(d.r.Request.ID) + "input byte size mismatch for input '" + t.Name +
			"' for model '" + d.model + "'. Expected " + strconv.FormatInt(want, 10) + ", got " + strconv.Itoa(len(t.Data)))
	}
	return nil
}

func byteSizeOverflowError(name string, count int64, size int) error {
	return invalidArg("byte size overflow for input '" + name + "': element count " + strconv.FormatInt(count, 10) +
		" times element size " + strconv.Itoa(size) + " exceeds maximum size of " + strconv.FormatInt(math.MaxInt64, 10))
}
