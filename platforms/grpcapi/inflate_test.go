package grpcapi

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestCompressedMessagesInflateBounded: a compressed request inflates to
// at most the larger of 64 MiB and 32 times its size. 96 MiB of zeros
// (about 100 KB compressed, in both encodings) is refused while inflating,
// and the server answers the next request; 8 MiB of zeros, over 32 to 1
// but under 64 MiB, reaches the model's checks. Before, both inflated
// whole (up to Triton's INT32_MAX) and met the shape check.
func TestCompressedMessagesInflateBounded(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	zeros := func(n int) *pb.ModelInferRequest {
		req := simpleRequest(true)
		req.RawInputContents[0] = make([]byte, n)
		return req
	}
	for _, algo := range []string{gzip.Name, Deflate} {
		t.Run(algo, func(t *testing.T) {
			_, err := h.client.ModelInfer(ctx(t), zeros(96<<20), grpc.UseCompressor(algo))
			if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "inferd's bound for a compressed message") {
				t.Fatalf("96 MiB of zeros: %v, want INTERNAL naming the bound", err)
			}
			_, err = h.client.ModelInfer(ctx(t), zeros(8<<20), grpc.UseCompressor(algo))
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("8 MiB of zeros: %v, want the model's INVALID_ARGUMENT for its size", err)
			}
			if _, err := h.client.ModelInfer(ctx(t), simpleRequest(true), grpc.UseCompressor(algo)); err != nil {
				t.Fatalf("an ordinary compressed request after them: %v", err)
			}
		})
	}
}
