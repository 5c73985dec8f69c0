package python_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

func int32Request(model string, v int32) *core.InferRequest {
	return &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
		Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeInt32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, uint32(v))}}}
}

// TestAsyncDecoupledEnds: every request of a decoupled model whose execute
// is a coroutine ends: with its responses and the final flag, with the
// coroutine's exception (which is logged) when it raises, and by the
// client's deadline when the model never sends the final flag.
func TestAsyncDecoupledEnds(t *testing.T) {
	e := start(t, options{}, "async_decoupled")
	mv, release, err := e.srv.Acquire("async_decoupled", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	run := func(mode int32, timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var got streamed
		err := mv.InferStream(ctx, int32Request("async_decoupled", mode), func(r *core.InferResponse, final bool) error {
			if r != nil {
				got.outs = append(got.outs, int32(binary.LittleEndian.Uint32(output(r, "OUT").Data)))
			}
			return nil
		})
		return len(got.outs), err
	}
	for _, c := range []struct {
		mode      int32
		responses int
		want      string
	}{
		{3, 0, "Failed to process the request(s) for model 'async_decoupled_0', message: ValueError: async execute failed before responding"},
		{0, 1, "Failed to process the request(s) for model 'async_decoupled_0', message: ValueError: async execute failed after one response"},
	} {
		n, err := run(c.mode, 20*time.Second)
		if err == nil || core.CodeOf(err) != core.CodeInternal || err.Error() != c.want || n != c.responses {
			t.Fatalf("IN %d: %d responses, %v; want %d and %q", c.mode, n, err, c.responses, c.want)
		}
	}
	if n, err := run(2, time.Minute); err != nil || n != 1 {
		t.Fatalf("IN 2: %d responses, %v", n, err)
	}
	// The traceback comes through the worker's stderr pipe, copied apart
	// from its socket: it may trail the response.
	deadline := time.Now().Add(time.Minute)
	for _, text := range []string{"ValueError: async execute failed before responding", "ValueError: async execute failed after one response"} {
		for !strings.Contains(e.log.String(), text) {
			if time.Now().After(deadline) {
				t.Fatalf("the exception %q is not logged", text)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Never final: the request ends by its deadline, cancelled.
	n, err := run(1, 3*time.Second)
	if core.CodeOf(err) != core.CodeCancelled || n != 1 {
		t.Fatalf("IN 1: %d responses, %v; want 1 and CANCELLED by the deadline", n, err)
	}
	// The instance still serves.
	if n, err := run(2, time.Minute); err != nil || n != 1 {
		t.Fatalf("IN 2 afterwards: %d responses, %v", n, err)
	}
}
