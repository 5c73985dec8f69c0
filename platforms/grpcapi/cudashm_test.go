package grpcapi

import (
	"bytes"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/shm"
)

// TestCUDARegionsGRPC: an input and an output in CUDA regions over gRPC.
// On a device the model's instances read and write (-1: host memory,
// standing in for the GPU of a KIND_GPU instance), ONNX Runtime reads and
// writes the regions by address, never copying; on another (a GPU, for
// these CPU instances) the input is copied to the host and the output
// into its region. The response carries no data either way.
func TestCUDARegionsGRPC(t *testing.T) {
	const n = 1 << 16
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = byte(i*3 + 1)
	}
	for _, tc := range []struct {
		name   string
		device int64
		copies int32
	}{
		{"by address", -1, 0},
		{"copied", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &shmtest.Device{Mem: map[byte][]byte{1: bytes.Clone(data), 2: make([]byte, 4*n)}}
			h, regions, _ := shmHarnessWith(t, shm.NewManager(dev))
			servertest.Must(t, regions.RegisterCUDA("gin", shmtest.Handle(1), tc.device, 4*n))
			servertest.Must(t, regions.RegisterCUDA("gout", shmtest.Handle(2), tc.device, 4*n))
			req := identityRequest("identity_fixed", "gin", n)
			req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams("gout", 0, 4*n)}}
			resp, err := h.client.ModelInfer(ctx(t), req)
			servertest.Must(t, err)
			if len(resp.RawOutputContents) > 1 || (len(resp.RawOutputContents) == 1 && len(resp.RawOutputContents[0]) > 0) {
				t.Fatalf("the response carries %d raw outputs with data", len(resp.RawOutputContents))
			}
			if !bytes.Equal(dev.Mem[2], data) {
				t.Fatal("the output region does not hold OUTPUT0")
			}
			if out, in := dev.CopiesOut.Load(), dev.CopiesIn.Load(); out != tc.copies || in != tc.copies {
				t.Fatalf("copies out of / into the regions: %d / %d, want %d each", out, in, tc.copies)
			}
		})
	}
}
