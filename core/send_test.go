package core_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// handOff is a backend named "handoff" whose Execute answers each request
// (OUT = IN) from a goroutine of its own and returns once the consumer has
// the response in hand (took), not once the consumer is done with it.
type handOff struct{ took chan struct{} }

func (handOff) Name() string { return "handoff" }

func (handOff) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

func (h handOff) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return h, nil
}

func (h handOff) Execute(ctx context.Context, e *core.Execution) error {
	for _, r := range e.Requests {
		in := r.Inputs[0]
		go func() {
			_ = r.Send(&core.ExecResponse{Outputs: []*core.Tensor{{Name: "OUT", DataType: in.DataType, Shape: in.Shape, Data: in.Data}}}, true)
		}()
	}
	for range e.Requests {
		select {
		case <-h.took:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (handOff) Close() error { return nil }

// TestBlockedConsumerHoldsOnlyItsRequest: a request whose consumer keeps
// its response (an in-process InferStream consumer that blocks) holds back
// nothing else: its execution ends, and the instance, the model's only
// one, runs the next requests meanwhile; the held request ends with its
// response once its consumer returns. The core must not hold a lock of
// the request while the consumer runs, since the end of the execution
// takes it.
func TestBlockedConsumerHoldsOnlyItsRequest(t *testing.T) {
	h := handOff{took: make(chan struct{}, 16)}
	s := servertest.Start(t, servertest.Options{Backends: []core.Backend{h}, Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"h": {Config: `backend: "handoff"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, ONNX: []byte("handoff")},
	})})
	mv, release, err := s.Acquire("h", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	req := func(v int32) *core.InferRequest {
		return &core.InferRequest{ModelName: "h", ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeInt32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, uint32(v))}}}
	}
	unblock, entered := make(chan struct{}), make(chan struct{})
	var held []*core.InferResponse
	heldDone := make(chan error, 1)
	go func() {
		heldDone <- mv.InferStream(context.Background(), req(7), func(r *core.InferResponse, final bool) error {
			if r != nil {
				held = append(held, r)
			}
			h.took <- struct{}{}
			close(entered)
			<-unblock
			return nil
		})
	}()
	// The held consumer has its response; the others come after it.
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the held request got no response")
	}
	others := make(chan error, 1)
	go func() {
		for i := range 3 {
			err := mv.InferStream(context.Background(), req(int32(i)), func(*core.InferResponse, bool) error {
				h.took <- struct{}{}
				return nil
			})
			if err != nil {
				others <- err
				return
			}
		}
		others <- nil
	}()
	select {
	case err := <-others:
		servertest.Must(t, err)
	case <-time.After(20 * time.Second):
		close(unblock)
		t.Fatal("a consumer that holds its response holds back the instance's other requests")
	}
	close(unblock)
	select {
	case err := <-heldDone:
		servertest.Must(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the held request did not end once its consumer returned")
	}
	if len(held) != 1 || binary.LittleEndian.Uint32(held[0].Outputs[0].Data) != 7 {
		t.Fatalf("held request: %d responses", len(held))
	}
}
