package core_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

func repeatRequest(n int, params map[string]any) *core.InferRequest {
	data := make([]byte, 0, 4*n)
	for i := range n {
		data = binary.LittleEndian.AppendUint32(data, uint32(100+i))
	}
	return &core.InferRequest{ModelName: "repeat", ModelVersion: core.LatestVersion, Parameters: params,
		Inputs: []*core.Tensor{{Name: "IN", DataType: core.TypeInt32, Shape: []int64{int64(n)}, Data: data}}}
}

func startRepeat(t *testing.T) *core.ModelVersion {
	t.Helper()
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
	})})
	mv, release, err := s.Acquire("repeat", core.LatestVersion)
	servertest.Must(t, err)
	t.Cleanup(release)
	return mv
}

type streamed struct {
	resps  []*core.InferResponse
	finals int
}

func (s *streamed) emit(r *core.InferResponse, final bool) error {
	if s.finals > 0 {
		panic("a response after the final one")
	}
	if r != nil {
		s.resps = append(s.resps, r)
	}
	if final {
		s.finals++
	}
	return nil
}

// TestInferStream: a decoupled model's 0, 1 and 1,000 responses reach the
// consumer in order, each with its outputs, then exactly one final flag;
// the request counts as one success.
func TestInferStream(t *testing.T) {
	mv := startRepeat(t)
	for _, n := range []int{0, 1, 1000} {
		var got streamed
		before := mv.Stats.Snapshot().Success.Count
		if err := mv.InferStream(context.Background(), repeatRequest(n, nil), got.emit); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got.resps) != n || got.finals != 1 {
			t.Fatalf("n=%d: %d responses, %d finals", n, len(got.resps), got.finals)
		}
		for i, r := range got.resps {
			if len(r.Outputs) != 2 || r.ModelName != "repeat" {
				t.Fatalf("response %d: %+v", i, r)
			}
			for _, o := range r.Outputs {
				want := uint32(100 + i)
				if o.Name == "IDX" {
					want = uint32(i)
				}
				if v := binary.LittleEndian.Uint32(o.Data); v != want {
					t.Fatalf("response %d %s = %d, want %d", i, o.Name, v, want)
				}
			}
		}
		if after := mv.Stats.Snapshot().Success.Count; after != before+1 {
			t.Fatalf("n=%d: success count %d -> %d", n, before, after)
		}
	}
}

// TestInferStreamCancel: a client that goes away mid-stream ends the
// request at once as cancelled; the backend's next send fails, so it
// stops producing, and the model serves the next request. The request
// would take 100 s to send all its responses, so the 30 s bound tells
// "ended at once" (ms) from "ran to the end" on any machine.
func TestInferStreamCancel(t *testing.T) {
	mv := startRepeat(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	ended := make(chan error, 1)
	go func() {
		ended <- mv.InferStream(ctx, repeatRequest(100000, map[string]any{"wait_us": int64(1000)}), func(r *core.InferResponse, final bool) error {
			if n++; n == 10 {
				cancel()
			}
			return nil
		})
	}()
	var err error
	select {
	case err = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end within 30 s of its cancellation")
	}
	if core.CodeOf(err) != core.CodeCancelled {
		t.Fatalf("cancelled stream ended with %v", err)
	}
	if n < 10 || n > 12 {
		t.Fatalf("%d responses after cancelling at 10", n)
	}
	if st := mv.Stats.Snapshot(); st.Failures[core.FailCanceled] != 1 {
		t.Fatalf("cancelled count %d", st.Failures[core.FailCanceled])
	}
	var got streamed
	if err := mv.InferStream(context.Background(), repeatRequest(3, nil), got.emit); err != nil || len(got.resps) != 3 {
		t.Fatalf("after a cancel: %d responses, %v", len(got.resps), err)
	}
}

// TestInferStreamErrors: an error response ends the request with it,
// after the responses before it; Infer, which expects exactly one
// response, refuses another count; emit's error ends the request.
func TestInferStreamErrors(t *testing.T) {
	mv := startRepeat(t)
	var got streamed
	err := mv.InferStream(context.Background(), repeatRequest(5, map[string]any{"fail_at": int64(2)}), got.emit)
	if err == nil || !strings.Contains(err.Error(), "repeat: failing at response 2") || len(got.resps) != 2 || got.finals != 0 {
		t.Fatalf("failing stream: %v after %d responses", err, len(got.resps))
	}
	if _, err := mv.Infer(context.Background(), repeatRequest(2, nil)); err == nil || !strings.Contains(err.Error(), "sent 2 responses to a request that expects exactly one") {
		t.Fatalf("Infer of two responses: %v", err)
	}
	stop := core.Errorf(core.CodeUnavailable, "consumer gone")
	err = mv.InferStream(context.Background(), repeatRequest(5, nil), func(*core.InferResponse, bool) error { return stop })
	if err == nil || err.Error() != "consumer gone" {
		t.Fatalf("emit error: %v", err)
	}
}
