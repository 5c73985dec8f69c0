package core

import (
	"context"
	"testing"
	"time"
)

// InferRequest.Queued is called once a request is in the model's queue,
// before it has run, or once it was refused before; never twice.
func TestInferRequestQueued(t *testing.T) {
	s, b := echoServer(t, "max_batch_size: 4\n"+`input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`+oneInstance)
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	queued := make(chan struct{}, 2)
	req := batchReq(7, 1, 1)
	req.Queued = func() { queued <- struct{}{} }
	done := make(chan error, 1)
	go func() {
		_, err := mv.Infer(context.Background(), req)
		done <- err
	}()
	select {
	case <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("Queued was not called")
	}
	started(t, b) // the execution waits at the gate: the request has not run
	select {
	case err := <-done:
		t.Fatalf("Infer returned (%v) before its execution ran", err)
	default:
	}
	b.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(queued) != 0 {
		t.Fatal("Queued was called twice")
	}

	bad := batchReq(7, 1, 1)
	bad.Inputs[0].Name = "nope"
	n := 0
	bad.Queued = func() { n++ }
	if _, err := mv.Infer(context.Background(), bad); err == nil || !Rejected(err) || n != 1 {
		t.Fatalf("a refused request: %v, Queued called %d times", err, n)
	}
}
