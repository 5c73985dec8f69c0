package grpcapi

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// floodRequest asks httpapi's testdata/flood model.py (decoupled, one
// instance) for n responses of size integers each.
func floodRequest(id string, n, size int32) *pb.ModelInferRequest {
	scalar := func(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
	return &pb.ModelInferRequest{ModelName: "flood", Id: id,
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "N", Datatype: "INT32", Shape: []int64{1}},
			{Name: "SIZE", Datatype: "INT32", Shape: []int64{1}},
		},
		RawInputContents: [][]byte{scalar(n), scalar(size)}}
}

// TestStalledModelStream: a client that opens ModelStreamInfer on a
// decoupled model.py sending large responses fast, and never reads them,
// cannot hold the model's worker back: another stream's requests to the
// same instance are answered while the first stream's outbox is full, and
// the stalled request ends (it fails, so the model stops producing) once
// the outbox is full.
func TestStalledModelStream(t *testing.T) {
	root := t.TempDir()
	servertest.Must(t, os.CopyFS(filepath.Join(root, "flood"), os.DirFS("../httpapi/testdata/flood")))
	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	h := start(t, servertest.Options{Repo: root, Backends: []core.Backend{py}}, Options{})

	// The stalled stream lives until the test ends.
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	stalled, err := h.client.ModelStreamInfer(sctx)
	servertest.Must(t, err)
	servertest.Must(t, stalled.Send(floodRequest("stalled", 1000000, 16384)))
	mv, release, err := h.core.Acquire("flood", core.LatestVersion)
	servertest.Must(t, err)
	defer release()

	// Requests on another stream are answered until the stalled stream's
	// outbox has filled and its request has ended.
	for i, deadline := 0, time.Now().Add(90*time.Second); mv.Stats.Snapshot().Fail.Count == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream's request never ended")
		}
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := h.client.ModelStreamInfer(c)
		servertest.Must(t, err)
		servertest.Must(t, st.Send(floodRequest("small", 1, 4)))
		servertest.Must(t, st.CloseSend())
		resp, err := st.Recv()
		if err != nil || resp.GetErrorMessage() != "" {
			t.Fatalf("request %d while a stream stalls: %v %s", i, err, resp.GetErrorMessage())
		}
		// The stream ends once the request has sent its final flag: it
		// succeeded.
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("request %d while a stream stalls: %v, want the stream's end", i, err)
		}
		cancel()
		if v := decodeInt32s(resp.GetInferResponse().GetRawOutputContents()[0]); len(v) != 4 || v[3] != 3 {
			t.Fatalf("request %d while a stream stalls: %v", i, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
