package grpcapi

import (
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// stalledStream is a client that sends the requests it is fed, never
// half-closes and never takes a response (its flow-control window is
// shut) until it goes away: then Send and Recv fail.
type stalledStream struct {
	grpc.ServerStream
	ctx context.Context
	in  chan *pb.ModelInferRequest
}

func (s *stalledStream) Context() context.Context { return s.ctx }

func (s *stalledStream) Recv() (*pb.ModelInferRequest, error) {
	select {
	case r := <-s.in:
		return r, nil
	case <-s.ctx.Done():
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
}

func (s *stalledStream) Send(*pb.ModelStreamInferResponse) error {
	<-s.ctx.Done()
	return status.FromContextError(s.ctx.Err()).Err()
}

// settledGoroutines waits up to 10 s for the goroutine count to fall to
// at most limit and returns the last count.
func settledGoroutines(limit int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > limit && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// TestModelStreamInferNoLeak: streams whose client stops reading while a
// decoupled model produces thousands of responses, and then goes away
// with ordinary and failing requests still to answer, leave no goroutine
// behind: every one that hands a result to the stream's writer gives up
// once the stream has ended.
func TestModelStreamInferNoLeak(t *testing.T) {
	h := start(t, servertest.Options{Repo: conformanceRepo(t)}, Options{})
	simple, release, err := h.core.Acquire("simple", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	// The server's own goroutines are running; the streams' must all end.
	before := runtime.NumGoroutine()
	const streams, each = 8, 16
	done := make(chan error, streams)
	for i := range streams {
		ctx, cancel := context.WithCancel(context.Background())
		st := &stalledStream{ctx: ctx, in: make(chan *pb.ModelInferRequest, 1+2*each)}
		go func() { done <- h.api.ModelStreamInfer(st) }()
		// The decoupled model's 5,000 responses come at once.
		st.in <- repeatRequest("flood", 5000)
		time.Sleep(100 * time.Millisecond)
		succeeded := simple.Stats.Snapshot().Success.Count
		for range each {
			st.in <- simpleWithID("s")
		}
		// The ordinary requests run, then wait to hand their results over.
		for deadline := time.Now().Add(10 * time.Second); simple.Stats.Snapshot().Success.Count < succeeded+each; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("stream %d: the simple requests did not run", i)
			}
		}
		// Requests that fail before they run are answered by the reader.
		for j := range each {
			st.in <- &pb.ModelInferRequest{ModelName: "missing", Id: strings.Repeat("m", j)}
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}
	for range streams {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a stream whose client went away did not end")
		}
	}
	if n := settledGoroutines(before + 2); n > before+2 {
		var dump strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("%d goroutines after the streams ended, %d before:\n%s", n, before, dump.String())
	}
}
