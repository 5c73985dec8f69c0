package core

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/fuzzshape"
	"github.com/inferd/inferd/repo/modelconfig"
)

// FuzzValidateInputs feeds prepare the tensors either transport may hand
// the core (the HTTP codec and gRPC both build an InferRequest and leave
// the shape and byte-size checks to it): any datatype, shape and bytes,
// plain or raw, to batching and non-batching models with variable dims.
// Whatever it accepts is consistent: no negative dim, and the bytes are
// exactly the shape's (computed without wrapping) or, for BYTES, hold
// exactly its element count. It never panics.
func FuzzValidateInputs(f *testing.F) {
	f.Add(uint8(TypeFP32), false, false, fuzzshape.Bytes(1<<62), []byte{})
	f.Add(uint8(TypeFP32), false, false, fuzzshape.Bytes(1<<62+1), []byte{0, 0, 0, 0})
	f.Add(uint8(TypeFP64), true, false, fuzzshape.Bytes(1, 1<<61), []byte{})
	f.Add(uint8(TypeFP32), false, false, fuzzshape.Bytes(1<<32, 1<<32), []byte{})
	f.Add(uint8(TypeInt32), true, false, fuzzshape.Bytes(2, 2), make([]byte, 16))
	f.Add(uint8(TypeBytes), false, false, fuzzshape.Bytes(2), []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0})
	f.Add(uint8(TypeBytes), false, false, fuzzshape.Bytes(1<<62), []byte{})
	f.Add(uint8(TypeUint8), false, true, fuzzshape.Bytes(0), make([]byte, 7))
	f.Add(uint8(TypeFP16), true, true, fuzzshape.Bytes(0, 0), make([]byte, 6))
	f.Add(uint8(TypeInt64), false, false, fuzzshape.Bytes(-1), []byte{})
	f.Add(uint8(TypeFP32), false, false, fuzzshape.Bytes(1<<62, 0), []byte{})
	models := map[string]*ModelVersion{}
	model := func(dt DataType, batching bool, rank int) *ModelVersion {
		key := fmt.Sprint(dt, batching, rank)
		if mv, ok := models[key]; ok {
			return mv
		}
		dims := strings.TrimSuffix(strings.Repeat("-1, ", rank), ", ")
		maxBatch := 0
		if batching {
			maxBatch = 8
		}
		cfg, err := modelconfig.Parse(fmt.Appendf(nil, "max_batch_size: %d\ninput [ { name: \"x\" data_type: %s dims: [ %s ] } ]\noutput [ { name: \"y\" data_type: %s dims: [ -1 ] } ]",
			maxBatch, dt.ConfigName(), dims, dt.ConfigName()))
		if err != nil {
			f.Fatal(err)
		}
		mv := newModelVersion("m", 1, cfg)
		models[key] = mv
		return mv
	}
	f.Fuzz(func(t *testing.T, dtype uint8, batching, raw bool, dims, data []byte) {
		dt := DataType(dtype%uint8(TypeBF16) + 1)
		shape := fuzzshape.Shape(dims)
		rank := max(len(shape), 1)
		if batching && len(shape) > 1 {
			rank = len(shape) - 1
		}
		mv := model(dt, batching, rank)
		tensor := &Tensor{Name: "x", DataType: dt, Shape: shape, Data: data}
		if raw {
			tensor = &Tensor{Data: data}
		}
		var r ExecRequest
		err := mv.prepare(&InferRequest{Raw: raw, Inputs: []*Tensor{tensor}}, &r)
		if err != nil {
			if CodeOf(err) != CodeInvalidArg {
				t.Fatalf("%v: code %v", err, CodeOf(err))
			}
			return
		}
		in := r.Inputs[0]
		for _, d := range in.Shape {
			if d < 0 {
				t.Fatalf("accepted shape %v", in.Shape)
			}
		}
		if batching && (len(in.Shape) == 0 || in.Shape[0] > 8) {
			t.Fatalf("accepted batch shape %v", in.Shape)
		}
		if dt == TypeBytes {
			if n := CountBytesElements(in.Data); n < 0 || n != ElementCount(in.Shape) {
				t.Fatalf("accepted %d BYTES elements for shape %v", n, in.Shape)
			}
			return
		}
		if fuzzshape.ExactByteSize(in.Shape, dt.ByteSize()).Cmp(big.NewInt(int64(len(in.Data)))) != 0 {
			t.Fatalf("accepted %d bytes of %s for shape %v", len(in.Data), dt, in.Shape)
		}
	})
}
