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

// TestInferStream: a decoupled model's 0, 1 and 1,000 responses reach the
// consumer in order, each with its outputs, then exactly one final flag;
// the request counts as one success.
func TestInferStream(t *testing.T) {
	mv := startRepeat(t)
	for _, n := range []int{0, 1, 1000} {
		var got servertest.Streamed
		before := mv.Stats.Snapshot().Success.Count
		if err := mv.InferStream(context.Background(), servertest.RepeatRequest(n, nil), got.Emit); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got.Resps) != n || got.Finals != 1 {
			t.Fatalf("n=%d: %d responses, %d finals", n, len(got.Resps), got.Finals)
		}
		for i, r := range got.Resps {
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
		ended <- mv.InferStream(ctx, servertest.RepeatRequest(100000, map[string]any{"wait_us": int64(1000)}), func(r *core.InferResponse, final bool) error {
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
	var got servertest.Streamed
	if err := mv.InferStream(context.Background(), servertest.RepeatRequest(3, nil), got.Emit); err != nil || len(got.Resps) != 3 {
		t.Fatalf("after a cancel: %d responses, %v", len(got.Resps), err)
	}
}

// TestInferStreamErrors: an error response ends the request with it,
// after the responses before it; Infer, which expects exactly one
// response, refuses another count; emit's error ends the request.
func TestInferStreamErrors(t *testing.T) {
	mv := startRepeat(t)
	var got servertest.Streamed
	err := mv.InferStream(context.Background(), servertest.RepeatRequest(5, map[string]any{"fail_at": int64(2)}), got.Emit)
	if err == nil || !strings.Contains(err.Error(), "repeat: failing at response 2") || len(got.Resps) != 2 || got.Finals != 0 {
		t.Fatalf("failing stream: %v after %d responses", err, len(got.Resps))
	}
	if _, err := mv.Infer(context.Background(), servertest.RepeatRequest(2, nil)); err == nil || !strings.Contains(err.Error(), "sent 2 responses to a request that expects exactly one") {
		t.Fatalf("Infer of two responses: %v", err)
	}
	stop := core.Errorf(core.CodeUnavailable, "consumer gone")
	err = mv.InferStream(context.Background(), servertest.RepeatRequest(5, nil), func(*core.InferResponse, bool) error { return stop })
	if err == nil || err.Error() != "consumer gone" {
		t.Fatalf("emit error: %v", err)
	}
}
