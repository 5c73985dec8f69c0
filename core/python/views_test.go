package python_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/inferd/inferd/core"
)

// TestOutputsViewingInputs: large outputs that are views of their
// request's input in the shared arena (the worker sends where they lie
// instead of copying them) come back right, with several requests in one
// execute and with and without the arena.
func TestOutputsViewingInputs(t *testing.T) {
	for _, noArena := range []bool{false, true} {
		e := start(t, options{noArena: noArena}, "input_views")
		const n = 1 << 16 // 256 KiB, over the arena's threshold
		var wg sync.WaitGroup
		batches := make([]int64, 3)
		for c := range 3 {
			data := make([]byte, 4*n)
			for i := range n {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i*(c+1)%1013)))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := e.infer(&core.InferRequest{ModelName: "input_views",
					Inputs: []*core.Tensor{{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{1, n}, Data: data}}})
				if err != nil {
					t.Errorf("arena=%v, caller %d: %v", !noArena, c, err)
					return
				}
				same, tail := output(resp, "SAME"), output(resp, "TAIL")
				if same == nil || tail == nil || !bytes.Equal(same.Data, data) || !bytes.Equal(tail.Data, data[64:]) || tail.Shape[1] != n-16 {
					t.Errorf("arena=%v, caller %d: wrong outputs", !noArena, c)
				}
				batches[c], _ = resp.Parameters["batch"].(int64)
			}()
		}
		wg.Wait()
		if batches[0]+batches[1]+batches[2] <= 3 {
			t.Errorf("arena=%v: no execute call got more than one request: %v", !noArena, batches)
		}
	}
}
