package grpcapi

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestDirtyPool: Get returns the length asked for in the smallest size
// class holding it, or an unpooled buffer beyond the largest; Put keeps a
// buffer in the largest class its capacity holds, so that a later Get
// never returns less capacity than it asked for.
func TestDirtyPool(t *testing.T) {
	p := newDirtyPool()
	for _, c := range []struct{ n, cap int }{
		{0, 1 << minClass}, {1, 1 << minClass}, {256, 256}, {257, 512},
		{16 << 10, 16 << 10}, {16<<10 + 1, 32 << 10}, {1 << maxClass, 1 << maxClass}, {1<<maxClass + 1, 1<<maxClass + 1},
	} {
		b := p.Get(c.n)
		if len(*b) != c.n || cap(*b) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", c.n, len(*b), cap(*b), c.cap)
		}
		p.Put(b)
	}
	odd := make([]byte, 10, 700) // class 512
	p.Put(&odd)
	small := make([]byte, 100) // below the smallest class: dropped
	p.Put(&small)
	for range 4 {
		if b := p.Get(512); len(*b) != 512 || cap(*b) < 512 {
			t.Fatalf("Get(512) after Put: len %d cap %d", len(*b), cap(*b))
		}
		if b := p.Get(200); len(*b) != 200 || cap(*b) < 256 {
			t.Fatalf("Get(200) after Put: len %d cap %d", len(*b), cap(*b))
		}
	}
}

// TestServerWindows: the server announces its stream window in its
// SETTINGS and raises the connection's with a WINDOW_UPDATE, both to
// windowSize, before any call.
func TestServerWindows(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	addr := h.conn.Target()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	servertest.Must(t, err)
	defer conn.Close()
	servertest.Must(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = conn.Write([]byte(http2.ClientPreface))
	servertest.Must(t, err)
	fr := http2.NewFramer(conn, conn)
	servertest.Must(t, fr.WriteSettings())
	var streamWindow, connUpdate uint32
	for streamWindow == 0 || connUpdate == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream window %d, connection update %d: %v", streamWindow, connUpdate, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			v, ok := f.Value(http2.SettingInitialWindowSize)
			if !ok {
				t.Fatal("no SETTINGS_INITIAL_WINDOW_SIZE")
			}
			streamWindow = v
			servertest.Must(t, fr.WriteSettingsAck())
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connUpdate = f.Increment
			}
		}
	}
	if streamWindow != windowSize {
		t.Errorf("stream window %d, want %d", streamWindow, windowSize)
	}
	if connUpdate != windowSize-65535 { // from HTTP/2's initial 65,535
		t.Errorf("connection window raised by %d, want %d", connUpdate, windowSize-65535)
	}
}

// TestDialOptions: a client dialled with DialOptions sends a large tensor
// from its own buffer and gets it back intact (beyond the windows, so that
// flow control runs), and small calls and every other RPC work as with
// grpc-go's defaults.
func TestDialOptions(t *testing.T) {
	const identity = `name: "identity_u8"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
`
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple":      simpleModel(),
		"identity_u8": {Config: identity, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Uint8, -1))},
	})
	h := start(t, servertest.Options{Repo: root}, Options{})
	conn, err := grpc.NewClient(h.conn.Target(), DialOptions()...)
	servertest.Must(t, err)
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)

	for _, n := range []int{0, 1, rawMinLength - 1, rawMinLength, 4 << 20, windowSize + 12345} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + i>>12)
		}
		resp, err := client.ModelInfer(ctx(t), &pb.ModelInferRequest{
			ModelName:        "identity_u8",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "UINT8", Shape: []int64{int64(n)}}},
			RawInputContents: [][]byte{data},
		})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if len(resp.RawOutputContents) != 1 || !bytes.Equal(resp.RawOutputContents[0], data) {
			t.Fatalf("%d bytes: the identity did not echo its input", n)
		}
		if len(resp.Outputs) != 1 || resp.Outputs[0].Shape[0] != int64(n) {
			t.Fatalf("%d bytes: outputs %v", n, resp.Outputs)
		}
	}
	resp, err := client.ModelInfer(ctx(t), simpleRequest(true))
	servertest.Must(t, err)
	checkSimple(t, resp)

	// The stream sends requests through the same codec, and receives its
	// responses through grpc-go's.
	stream, err := client.ModelStreamInfer(ctx(t))
	servertest.Must(t, err)
	big := bytes.Repeat([]byte{1, 2, 3, 5}, 1<<18)
	for range 2 {
		servertest.Must(t, stream.Send(&pb.ModelInferRequest{
			ModelName:        "identity_u8",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "UINT8", Shape: []int64{int64(len(big))}}},
			RawInputContents: [][]byte{big},
		}))
		sr, err := stream.Recv()
		servertest.Must(t, err)
		if sr.ErrorMessage != "" || len(sr.GetInferResponse().GetRawOutputContents()) != 1 || !bytes.Equal(sr.InferResponse.RawOutputContents[0], big) {
			t.Fatalf("stream response: %q, the identity did not echo its input", sr.ErrorMessage)
		}
	}
	servertest.Must(t, stream.CloseSend())
	md, err := client.ModelMetadata(ctx(t), &pb.ModelMetadataRequest{Name: "simple"})
	servertest.Must(t, err)
	if md.Name != "simple" || len(md.Inputs) != 2 {
		t.Fatalf("metadata %v", md)
	}
}
