package grpcapi

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// BenchmarkUnmarshalInferRequest measures the server codec's decoding of a
// ModelInferRequest as grpc-go hands it over (unmarshalWireRequest: the
// scan, then the decoding): `simple` with raw and with typed contents, a
// 4 MiB FP32 tensor, and 1,000 short strings in bytes_contents.
func BenchmarkUnmarshalInferRequest(b *testing.B) {
	big := &pb.ModelInferRequest{ModelName: "identity_fp32",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, identityElems}}},
		RawInputContents: [][]byte{make([]byte, 4*identityElems)}}
	words := &pb.ModelInferRequest{ModelName: "id_BYTES",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "BYTES", Shape: []int64{1000},
			Contents: &pb.InferTensorContents{BytesContents: bytes.Split(bytes.Repeat([]byte("word "), 1000), []byte(" "))[:1000]}}}}
	cases := []struct {
		name string
		req  *pb.ModelInferRequest
	}{{"simple-raw", simpleRequest(true)}, {"simple-typed", simpleRequest(false)}, {"identity-4MiB", big}, {"bytes-1000", words}}
	c := newInferCodec()
	for _, tc := range cases {
		wire, err := proto.Marshal(tc.req)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				var w wireRequest
				if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &w); err != nil || w.refused != nil {
					b.Fatal(err, w.refused)
				}
			}
		})
	}
}

// BenchmarkModelInferRoundTrip measures ModelInfer calls one at a time
// over a loopback listener with DialOptions' client: `simple` with raw
// contents, and a 4 MiB FP32 identity. B/op are the client's and the
// server's together.
func BenchmarkModelInferRoundTrip(b *testing.B) {
	srv := startBenchServers(b, benchModels())
	client := dialBench(b, srv.grpcAddr, true)
	big := &pb.ModelInferRequest{ModelName: "identity_fp32",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, identityElems}}},
		RawInputContents: [][]byte{make([]byte, 4*identityElems)}}
	cases := []struct {
		name string
		req  *pb.ModelInferRequest
	}{{"simple-raw", simpleRequest(true)}, {"identity-4MiB", big}}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ModelInfer(context.Background(), tc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
