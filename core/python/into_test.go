package python_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/inferd/inferd/core"
)

// TestOutputIntoDestination: an output that comes back through the arena
// is copied once, straight into the caller's destination
// (core.RequestedOutput.Into), and its Data is then a prefix of it (the
// frontend's copy into a shared-memory region is skipped, see
// platforms/shm WriteOutput). A destination too small, or overlapping the
// request's input, is left alone and the output has memory of its own; so
// has an output small enough to travel in the frame.
func TestOutputIntoDestination(t *testing.T) {
	e := start(t, options{}, "identity")
	const n = 1 << 16 // 256 KiB of FP32, over the arena's threshold
	input := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(input[4*i:], math.Float32bits(float32(i%1009)*0.25))
	}
	mark := func(size int) []byte { return bytes.Repeat([]byte{0xAB}, size) }
	sharedIn := append([]byte(nil), input...)
	cases := []struct {
		name    string
		in      []byte // the input's bytes
		into    []byte
		aliased bool
	}{
		{"exact", input, mark(4 * n), true},
		{"larger", input, mark(4*n + 100), true},
		{"too small", input, mark(4*n - 4), false},
		{"overlaps the input", sharedIn, sharedIn, false},
		{"small tensor in the frame", input[:64], mark(64), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := append([]byte(nil), c.into...)
			resp, err := e.infer(&core.InferRequest{ModelName: "identity",
				Inputs:  []*core.Tensor{{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, int64(len(c.in) / 4)}, Data: c.in}},
				Outputs: []core.RequestedOutput{{Name: "OUTPUT0", Into: c.into}}})
			if err != nil {
				t.Fatal(err)
			}
			got := output(resp, "OUTPUT0")
			if got == nil || !bytes.Equal(got.Data, c.in) {
				t.Fatalf("wrong output")
			}
			aliased := unsafe.SliceData(got.Data) == unsafe.SliceData(c.into)
			if aliased != c.aliased {
				t.Fatalf("output aliases the destination: %v, want %v", aliased, c.aliased)
			}
			switch {
			case c.aliased:
				if !bytes.Equal(c.into[:len(c.in)], c.in) || !bytes.Equal(c.into[len(c.in):], before[len(c.in):]) {
					t.Fatal("destination does not hold exactly the output")
				}
			case !bytes.Equal(c.into, before):
				t.Fatal("a destination not used was written")
			}
		})
	}
}

// TestOutputIntoDestinationBatched: in an execution of several requests
// (a dynamic batcher) each request gets its output in its own destination:
// the Python backend answers every request on its own, where ONNX Runtime
// runs one concatenated batch.
func TestOutputIntoDestinationBatched(t *testing.T) {
	e := start(t, options{}, "identity_batched")
	const n, callers = 1 << 15, 4
	type result struct {
		batch int64
		err   error
	}
	results := make(chan result, callers)
	for c := range callers {
		go func() {
			input := bytes.Repeat([]byte{byte(c + 1)}, 4*n)
			into := make([]byte, 4*n)
			resp, err := e.infer(&core.InferRequest{ModelName: "identity_batched",
				Inputs:  []*core.Tensor{{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, n}, Data: input}},
				Outputs: []core.RequestedOutput{{Name: "OUTPUT0", Into: into}}})
			if err != nil {
				results <- result{err: err}
				return
			}
			if got := output(resp, "OUTPUT0"); got == nil || unsafe.SliceData(got.Data) != unsafe.SliceData(into) || !bytes.Equal(into, input) {
				results <- result{err: fmt.Errorf("caller %d: output not in its destination, or wrong", c)}
				return
			}
			batch, _ := resp.Parameters["batch"].(int64)
			results <- result{batch: batch}
		}()
	}
	biggest := int64(0)
	for range callers {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		biggest = max(biggest, r.batch)
	}
	if biggest < 2 {
		t.Fatal("no execution held several requests: the batched case was not exercised")
	}
}

// TestOutputIntoDestinationBytes: a BYTES output from the arena is in its
// serialized form already (4-byte lengths and bytes, as a region holds
// it), so it goes to its destination as a fixed-size one does.
func TestOutputIntoDestinationBytes(t *testing.T) {
	e := start(t, options{}, "bytes_identity")
	in := bytesTensor("INPUT0", strings.Repeat("a", 40000), strings.Repeat("b", 40000))
	into := make([]byte, len(in.Data))
	resp, err := e.infer(&core.InferRequest{ModelName: "bytes_identity", Inputs: []*core.Tensor{in},
		Outputs: []core.RequestedOutput{{Name: "OUTPUT0", Into: into}}})
	if err != nil {
		t.Fatal(err)
	}
	got := output(resp, "OUTPUT0")
	if got == nil || unsafe.SliceData(got.Data) != unsafe.SliceData(into) || !bytes.Equal(into, in.Data) {
		t.Fatal("BYTES output not in its destination, or wrong")
	}
}
