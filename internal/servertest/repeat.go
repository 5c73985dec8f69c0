package servertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Repeat is an in-Go decoupled backend named "repeat" (as Triton's
// repeat_int32 test model): for an INT32 input IN of n elements it sends
// n responses, the i-th holding OUT = [IN[i]] and IDX = [i], from its own
// goroutine after Execute has returned, then a final flag without a
// response. A request parameter "wait_us" (int64) pauses before each
// response, and "fail_at" (int64) ends the request with an error in place
// of that response.
type Repeat struct{}

// RepeatConfig is a decoupled model config for Repeat.
const RepeatConfig = `backend: "repeat"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_INT32 dims: [ 1 ] } ]
`

// Name implements core.Backend.
func (Repeat) Name() string { return "repeat" }

// AutoComplete implements core.Backend; the config must be complete.
func (Repeat) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

// NewInstance implements core.Backend.
func (Repeat) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return repeatInstance{}, nil
}

type repeatInstance struct{}

func (repeatInstance) Execute(_ context.Context, e *core.Execution) error {
	now := time.Now()
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = now, now, now, now
	for _, r := range e.Requests {
		if len(r.Inputs) != 1 {
			return fmt.Errorf("repeat: want one input, got %d", len(r.Inputs))
		}
		in := r.Inputs[0].Data
		wait, _ := r.Parameters["wait_us"].(int64)
		failAt, fail := r.Parameters["fail_at"].(int64)
		go func() {
			for i := range len(in) / 4 {
				time.Sleep(time.Duration(wait) * time.Microsecond)
				if fail && int64(i) == failAt {
					_ = r.Send(&core.ExecResponse{Err: core.Errorf(core.CodeInternal, "repeat: failing at response %d", i)}, true)
					return
				}
				resp := &core.ExecResponse{}
				for _, name := range r.Outputs {
					v := in[4*i : 4*i+4]
					if name == "IDX" {
						v = binary.LittleEndian.AppendUint32(nil, uint32(i))
					}
					resp.Outputs = append(resp.Outputs, &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: []int64{1}, Data: v})
				}
				if r.Send(resp, false) != nil {
					return // the client went away
				}
			}
			_ = r.Send(nil, true)
		}()
	}
	return nil
}

func (repeatInstance) Close() error { return nil }

// RepeatRequest asks the repeat model for n responses (100, 101, ...),
// with the given parameters (wait_us, fail_at).
func RepeatRequest(n int, params map[string]any) *core.InferRequest {
	data := make([]byte, 0, 4*n)
	for i := range n {
		data = binary.LittleEndian.AppendUint32(data, uint32(100+i))
	}
	return &core.InferRequest{ModelName: "repeat", ModelVersion: core.LatestVersion, Parameters: params,
		Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeInt32, Shape: []int64{int64(n)}, Data: data}}}
}

// Streamed collects a stream's responses (Emit is InferStream's consumer)
// and counts its final flags, panicking on a response after the final one.
type Streamed struct {
	Resps  []*core.InferResponse
	Finals int
}

// Emit takes one response of the stream.
func (s *Streamed) Emit(r *core.InferResponse, final bool) error {
	if s.Finals > 0 {
		panic("a response after the final one")
	}
	if r != nil {
		s.Resps = append(s.Resps, r)
	}
	if final {
		s.Finals++
	}
	return nil
}
