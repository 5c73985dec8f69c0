package grpcapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// BenchmarkGRPCBatching measures, in one run, the compute-bound MLP of
// BENCHMARKS.md figure 1 (sidebyside.MLPConfig: one instance, one intra-op
// thread, dynamic batching with a 500 µs queue delay) served over gRPC
// (ModelInfer with raw_input_contents, batch-1 requests from 16 callers
// over one client connection, as tritonclient does) and over HTTP with the
// binary extension on the same core, and the same backend in-process
// executing batch-8 batches back to back (sidebyside.MLPReference). The
// "ratio" sub-benchmark reports each frontend's throughput over the
// in-process one (figure 3 of the gRPC issue, beside figure 1's HTTP
// ratio) and gRPC's over HTTP's:
//
//	go test ./platforms/grpcapi -run '^$' -bench BenchmarkGRPCBatching -benchtime 3s -count 3
func BenchmarkGRPCBatching(b *testing.B) {
	const model = "mlp_batched"
	srv := startBenchServers(b, map[string]servertest.Model{
		model: {
			Config: sidebyside.MLPConfig(model, true),
			ONNX:   onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers)),
		},
	})
	ref := sidebyside.NewMLPReference(b, srv.root, model)

	x := sidebyside.MLPInput()
	req := &pb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, sidebyside.MLPIn}}},
		Outputs:          []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
		RawInputContents: [][]byte{x},
	}
	header := sidebyside.MLPBinaryHeader()
	url := srv.httpBase + "/v2/models/" + model + "/infer"
	client := dialBench(b, srv.grpcAddr, true)

	// Both frontends compute what the in-process reference does.
	want := ref.Y(b, x)
	resp, err := client.ModelInfer(context.Background(), req)
	servertest.Must(b, err)
	if len(resp.RawOutputContents) != 1 {
		b.Fatalf("gRPC: %d raw outputs", len(resp.RawOutputContents))
	}
	if err := sidebyside.CloseFP32(resp.RawOutputContents[0], want); err != nil {
		b.Fatalf("gRPC differs from in-process: %v", err)
	}
	if err := sidebyside.CloseFP32(httpBinaryY(b, url, header, x), want); err != nil {
		b.Fatalf("HTTP differs from in-process: %v", err)
	}

	rs := sidebyside.Results{}
	rs.Run(b, "in-process-ort/batch8", sidebyside.MLPInstances, sidebyside.MLPBatch, ref.Batch8Caller(x))
	rs.RunExecutions(b, "grpc/dynamic/c16", sidebyside.MLPConc, srv.core, model, grpcCaller(client, req, 1))
	rs.RunExecutions(b, "http-binary/dynamic/c16", sidebyside.MLPConc, srv.core, model, httpBinaryCaller(url, header, x))
	rs.Report(b,
		sidebyside.Ratio{Unit: "grpc/ort-thru", Num: "grpc/dynamic/c16", Den: "in-process-ort/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "http/ort-thru", Num: "http-binary/dynamic/c16", Den: "in-process-ort/batch8", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc/http-thru", Num: "grpc/dynamic/c16", Den: "http-binary/dynamic/c16", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "grpc/http-p50", Num: "grpc/dynamic/c16", Den: "http-binary/dynamic/c16", Of: sidebyside.P50Of},
	)
}

// httpBinaryY posts x as a binary-extension request and returns the binary
// output that follows the reply's JSON header.
func httpBinaryY(b *testing.B, url, header string, x []byte) []byte {
	b.Helper()
	hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(append([]byte(header), x...)))
	servertest.Must(b, err)
	hr.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	hr.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(hr)
	servertest.Must(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	servertest.Must(b, err)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("HTTP: status %d: %s", resp.StatusCode, body)
	}
	n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length"))
	servertest.Must(b, err)
	return body[n:]
}
