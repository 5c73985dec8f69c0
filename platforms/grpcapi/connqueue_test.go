package grpcapi

import (
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestConnectionResponseBudget: the decoupled responses a connection's
// streams hold unread count against one budget (Options.ConnQueueBytes,
// here 1 MiB). Two streams of 5,000 `repeat` responses (about 4.5 MB each
// as resultSize weighs them, well inside one stream's own 32 MiB) end with
// RESOURCE_EXHAUSTED when their client reads nothing until the requests
// have ended; a client that reads gets every response, as the budget is
// given back as responses are written. Without the budget each stalled
// stream kept its 4.5 MB and the client got them all.
func TestConnectionResponseBudget(t *testing.T) {
	const budget, streams, responses = 1 << 20, 2, 5000
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{ConnQueueBytes: budget})
	mv, release, err := h.core.Acquire("repeat", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	dial := func() pb.GRPCInferenceServiceClient {
		// 64 KiB flow-control windows: the client holds no more than that
		// of what it does not read.
		conn, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
		servertest.Must(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return pb.NewGRPCInferenceServiceClient(conn)
	}
	open := func(client pb.GRPCInferenceServiceClient, name string) []pb.GRPCInferenceService_ModelStreamInferClient {
		var out []pb.GRPCInferenceService_ModelStreamInferClient
		for i := range streams {
			st, err := client.ModelStreamInfer(ctx(t))
			servertest.Must(t, err)
			servertest.Must(t, st.Send(repeatRequest(fmt.Sprint(name, i), responses)))
			servertest.Must(t, st.CloseSend())
			out = append(out, st)
		}
		return out
	}
	// readAll counts a stream's responses up to its end.
	readAll := func(st pb.GRPCInferenceService_ModelStreamInferClient) (int, error) {
		n := 0
		for {
			r, err := st.Recv()
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			if r.GetErrorMessage() != "" {
				return n, fmt.Errorf("in-band error: %s", r.GetErrorMessage())
			}
			n++
		}
	}

	t.Run("reading", func(t *testing.T) {
		// Two streams one after the other on one connection, the first
		// kept open: 800 responses each (about 720 KB), which fit the
		// budget only if the first's were given back as they were written.
		client := dial()
		for i := range 2 {
			st, err := client.ModelStreamInfer(ctx(t))
			servertest.Must(t, err)
			servertest.Must(t, st.Send(repeatRequest(fmt.Sprint("read", i), 800)))
			for n := range 800 {
				if r, err := st.Recv(); err != nil || r.GetErrorMessage() != "" {
					t.Fatalf("stream %d, response %d: %v %s", i, n, err, r.GetErrorMessage())
				}
			}
		}
	})

	t.Run("stalled", func(t *testing.T) {
		failed := mv.Stats.Snapshot().Fail.Count
		stalled := open(dial(), "stalled")
		// Every request ends once its connection's budget is spent
		// (before, none did: each finished into its own queue).
		for deadline := time.Now().Add(time.Minute); mv.Stats.Snapshot().Fail.Count < failed+streams; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d stalled requests ended", mv.Stats.Snapshot().Fail.Count-failed, streams)
			}
		}
		for i, st := range stalled {
			n, err := readAll(st)
			if status.Code(err) != codes.ResourceExhausted || n >= responses {
				t.Errorf("stream %d: %d responses, %v; want fewer than %d and RESOURCE_EXHAUSTED", i, n, err, responses)
			}
		}
		// The connection's entry goes with its last stream.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			h.api.conns.mu.Lock()
			left := len(h.api.conns.m)
			h.api.conns.mu.Unlock()
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d connections still have a budget after their streams ended", left)
			}
		}
	})
}
