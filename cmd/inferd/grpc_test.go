package main

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"

	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// --allow-grpc serves GRPCInferenceService and grpc.health.v1 beside HTTP:
// the README example over gRPC, with raw tensors.
func TestGRPCListener(t *testing.T) {
	r := start(t, "--model-repository=../../examples/model_repository", "--grpc-address=127.0.0.1", "--id=grpc-test")
	addr := r.addrs["GRPC"]
	if addr == "" {
		t.Fatalf("no gRPC listener: %v", r.addrs)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := pb.NewGRPCInferenceServiceClient(conn)
	if live, err := c.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !live.GetLive() {
		t.Fatalf("ServerLive: %v %v", live, err)
	}
	if md, err := c.ServerMetadata(ctx, &pb.ServerMetadataRequest{}); err != nil || md.GetName() != "grpc-test" {
		t.Fatalf("ServerMetadata: %v %v", md, err)
	}
	if h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	raw := func(base int32) []byte {
		b := make([]byte, 0, 64)
		for i := range int32(16) {
			b = binary.LittleEndian.AppendUint32(b, uint32(base+i))
		}
		return b
	}
	resp, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "simple",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{raw(1), raw(0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range resp.GetOutputs() {
		got := int32(binary.LittleEndian.Uint32(resp.GetRawOutputContents()[i][4*15:]))
		want := map[string]int32{"OUTPUT0": 16 + 15, "OUTPUT1": 16 - 15}[out.GetName()]
		if got != want {
			t.Errorf("%s[15] = %d, want %d", out.GetName(), got, want)
		}
	}
}

// inEncoding records the grpc-encoding of the last response header.
type inEncoding struct{ last chan string }

func (e inEncoding) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (e inEncoding) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && h.Client {
		select {
		case <-e.last:
		default:
		}
		e.last <- h.Compression
	}
}
func (inEncoding) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (inEncoding) HandleConn(context.Context, stats.ConnStats)                       {}

// --grpc-infer-response-compression-level reaches grpcapi: with LOW (any
// case) a client accepting gzip and deflate gets gzip ModelInfer
// responses, and a deflate request is accepted (triton-inference-server/
// server docs/customization_guide/inference_protocols.md, "Compression").
func TestGRPCResponseCompression(t *testing.T) {
	r := start(t, "--model-repository=../../examples/model_repository", "--grpc-address=127.0.0.1", "--grpc-infer-response-compression-level=LOW")
	enc := inEncoding{last: make(chan string, 1)}
	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(enc))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := pb.NewGRPCInferenceServiceClient(conn)
	in := make([]byte, 64)
	for _, algo := range []string{gzip.Name, grpcapi.Deflate} {
		resp, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "simple",
			Inputs: []*pb.ModelInferRequest_InferInputTensor{
				{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
				{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
			},
			RawInputContents: [][]byte{in, in},
		}, grpc.UseCompressor(algo))
		if err != nil || len(resp.GetRawOutputContents()) != 2 || len(resp.GetRawOutputContents()[0]) != 64 {
			t.Fatalf("%s: %v %v", algo, resp, err)
		}
		if got := <-enc.last; got != gzip.Name {
			t.Fatalf("%s request: response encoding %q, want gzip", algo, got)
		}
	}
}

// The gRPC listener joins the run group's graceful drain
// (triton-inference-server/server src/grpc/stream_infer_handler.cc): once the server is stopping, a request read on a stream
// that was already open is answered in-band with Triton's text, the
// stream still ends cleanly when the client half-closes, and only then
// does the server finish stopping.
func TestGRPCDrain(t *testing.T) {
	r := start(t, "--model-repository=../../examples/model_repository", "--grpc-address=127.0.0.1", "--exit-timeout-secs=30")
	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pb.NewGRPCInferenceServiceClient(conn).ModelStreamInfer(ctx)
	must(t, err)
	in := make([]byte, 64)
	req := &pb.ModelInferRequest{ModelName: "simple", Id: "d",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{in, in},
	}
	must(t, st.Send(req))
	if resp, err := st.Recv(); err != nil || resp.GetErrorMessage() != "" {
		t.Fatalf("before stopping: %v %v", resp, err)
	}
	stopped := make(chan error, 1)
	go func() {
		r.cancel()
		err := <-r.done
		r.done <- err // for the cleanup's stop
		stopped <- err
	}()
	const draining = "GRPC server is shutting down and has stopped accepting new requests."
	for {
		must(t, st.Send(req))
		resp, err := st.Recv()
		must(t, err)
		if resp.GetErrorMessage() == draining {
			if resp.GetInferResponse().GetId() != "d" {
				t.Fatalf("draining answer %v", resp)
			}
			break
		}
		if resp.GetErrorMessage() != "" {
			t.Fatalf("while stopping: %v", resp)
		}
		select {
		case err := <-stopped:
			t.Fatalf("the server stopped with a stream open: %v", err)
		default:
		}
	}
	must(t, st.CloseSend())
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop after the stream ended")
	}
}
