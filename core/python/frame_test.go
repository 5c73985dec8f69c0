package python

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/inferd/inferd/core"
)

func TestFrameRoundTrip(t *testing.T) {
	arena := make([]byte, 1<<20)
	out := &frameOut{arena: arena}
	small := &core.Tensor{Name: "a", DataType: core.TypeInt32, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 2, 0, 0, 0}}
	large := &core.Tensor{Name: "b", DataType: core.TypeUint8, Shape: []int64{arenaThreshold}, Data: bytes.Repeat([]byte{7}, arenaThreshold)}
	descs := []tensorDesc{out.add(small), out.add(large)}
	if descs[0].Arena || !descs[1].Arena {
		t.Fatalf("placement: %+v", descs)
	}
	var buf bytes.Buffer
	if err := out.write(&buf, map[string]any{"op": "x", "tensors": descs}); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	f.arena = arena
	var h struct{ Tensors []tensorDesc }
	if err := json.Unmarshal(f.header, &h); err != nil {
		t.Fatal(err)
	}
	for i, want := range []*core.Tensor{small, large} {
		got, err := f.tensor(h.Tensors[i])
		if err != nil || !bytes.Equal(got.Data, want.Data) || got.DataType != want.DataType {
			t.Fatalf("tensor %d: %v", i, err)
		}
	}
}

// FuzzFrame feeds arbitrary bytes to the frame reader and the tensor
// decoder: malformed frames and descriptors are errors, never panics or
// reads outside the frame.
func FuzzFrame(f *testing.F) {
	seed := func(header string, blobs []byte) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(4+len(header)+len(blobs)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
		return append(append(b, header...), blobs...)
	}
	f.Add(seed(`{"op":"execute_done","seq":1,"responses":[{"outputs":[{"name":"o","datatype":"FP32","shape":[1],"off":0,"len":4}]}]}`, []byte{0, 0, 128, 63}))
	f.Add(seed(`{"op":"send","responses":[{"outputs":[{"name":"o","datatype":"BYTES","shape":[1],"off":2,"len":40,"arena":true}]}]}`, []byte{1, 2}))
	f.Add(seed(`{"op":"x"}`, nil))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0})
	arena := make([]byte, 64)
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := readFrame(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		fr.arena = arena
		var h struct {
			Responses []wireResponse `json:"responses"`
		}
		if json.Unmarshal(fr.header, &h) != nil {
			return
		}
		for _, r := range h.Responses {
			for _, d := range r.Outputs {
				tensor, err := fr.tensor(d)
				if err == nil && len(tensor.Data) != d.Len {
					t.Fatalf("tensor of %d bytes for a descriptor of %d", len(tensor.Data), d.Len)
				}
			}
		}
	})
}
