package grpcapi

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStreamResponseQueueEnds: streams whose client never reads while the
// decoupled `repeat` sends 300,000 responses on each end once their
// response queue is full, and what the server held for them is released
// while the client still holds the streams open; the client, reading at
// last, meets RESOURCE_EXHAUSTED after what was in flight. Before, the
// request alone ended and the queue (65,536 responses, about 60 MB) stayed
// until the client went away.
func TestStreamResponseQueueEnds(t *testing.T) {
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{})
	// A client whose flow-control windows stay at 64 KiB: it holds no more
	// than that of what it does not read.
	conn, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	servertest.Must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := pb.NewGRPCInferenceServiceClient(conn)
	mv, release, err := h.core.Acquire("repeat", core.LatestVersion)
	servertest.Must(t, err)
	defer release()

	warm, err := client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	servertest.Must(t, warm.Send(repeatRequest("warm", 100)))
	for range 100 {
		_, err := warm.Recv()
		servertest.Must(t, err)
	}
	before := liveHeap()

	const streams, responses = 2, 300000
	sctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	var stalled []pb.GRPCInferenceService_ModelStreamInferClient
	for i := range streams {
		st, err := client.ModelStreamInfer(sctx)
		servertest.Must(t, err)
		servertest.Must(t, st.Send(repeatRequest(fmt.Sprint("stalled", i), responses)))
		stalled = append(stalled, st)
	}
	// Each request ends once its stream's queue is full.
	for deadline := time.Now().Add(time.Minute); mv.Stats.Snapshot().Fail.Count < streams; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d stalled requests ended", mv.Stats.Snapshot().Fail.Count, streams)
		}
	}
	// Their streams' memory goes back while the client holds them open.
	const margin = 16 << 20
	held := liveHeap()
	for deadline := time.Now().Add(10 * time.Second); held > before+margin && time.Now().Before(deadline); held = liveHeap() {
		time.Sleep(50 * time.Millisecond)
	}
	if held > before+margin {
		t.Fatalf("the ended streams still hold %d bytes of the heap (%d before them)", held-before, before)
	}
	t.Logf("the heap after the streams ended: %d bytes, %d before", held, before)
	for i, st := range stalled {
		n := 0
		for ; ; n++ {
			if _, err = st.Recv(); err != nil {
				break
			}
		}
		wantContains(t, err, codes.ResourceExhausted, "stream response queue exceeded")
		if n >= responses {
			t.Fatalf("stream %d: %d responses, all of them", i, n)
		}
		t.Logf("stream %d: %d responses before its end", i, n)
	}
}
