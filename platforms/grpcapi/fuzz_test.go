package grpcapi

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// FuzzModelInferRequest decodes arbitrary bytes as a ModelInferRequest and
// converts it as ModelInfer does: the conversion must never panic, and
// every error it reports must be a classified core error whose status is
// one Triton answers with.
func FuzzModelInferRequest(f *testing.F) {
	seeds := []*pb.ModelInferRequest{simpleRequest(true), simpleRequest(false), {}}
	req := simpleRequest(true)
	req.Parameters = map[string]*pb.InferParameter{
		"priority": {ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: 1}},
		"k":        {ParameterChoice: &pb.InferParameter_DoubleParam{DoubleParam: 1.5}},
	}
	req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: map[string]*pb.InferParameter{
		"classification": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 2}},
	}}}
	seeds = append(seeds, req)
	req = simpleRequest(false)
	req.Inputs[0].Datatype, req.Inputs[1].Datatype = "BYTES", "INT8"
	req.Inputs[0].Contents = &pb.InferTensorContents{BytesContents: [][]byte{[]byte("ab"), nil}}
	req.Inputs[1].Parameters = map[string]*pb.InferParameter{"shared_memory_region": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}}}
	seeds = append(seeds, req)
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	allowed := map[codes.Code]bool{codes.InvalidArgument: true, codes.NotFound: true, codes.Unimplemented: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in pb.ModelInferRequest
		if proto.Unmarshal(data, &in) != nil {
			return
		}
		req, _, _, err := inferRequest(&in, nil, nil)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) {
				t.Fatalf("unclassified error %v", err)
			}
			if st, _ := status.FromError(statusError(err)); !allowed[st.Code()] || st.Message() != err.Error() {
				t.Fatalf("status %v %q for %v", st.Code(), st.Message(), err)
			}
			return
		}
		if len(req.Inputs) != len(in.GetInputs()) {
			t.Fatalf("%d inputs from %d", len(req.Inputs), len(in.GetInputs()))
		}
		for i, t0 := range req.Inputs {
			if t0.Data == nil {
				t.Fatalf("input %d has no data", i)
			}
		}
	})
}

// TestTypedContentsTruncate checks the per-element truncation of 8- and
// 16-bit integers sent as 32-bit typed contents (triton-inference-server/server
// src/grpc/infer_handler.cc, InferGRPCToInput).
func TestTypedContentsTruncate(t *testing.T) {
	cases := []struct {
		dt   string
		c    *pb.InferTensorContents
		want []byte
	}{
		{"INT8", &pb.InferTensorContents{IntContents: []int32{257, -1}}, []byte{0x01, 0xff}},
		{"INT16", &pb.InferTensorContents{IntContents: []int32{0x12345, -2}}, []byte{0x45, 0x23, 0xfe, 0xff}},
		{"UINT8", &pb.InferTensorContents{UintContents: []uint32{0x1ff}}, []byte{0xff}},
		{"BOOL", &pb.InferTensorContents{BoolContents: []bool{true, false}}, []byte{1, 0}},
		{"BYTES", &pb.InferTensorContents{BytesContents: [][]byte{[]byte("ab")}}, []byte{2, 0, 0, 0, 'a', 'b'}},
		{"FP32", &pb.InferTensorContents{}, []byte{}},
	}
	for _, tc := range cases {
		got, err := typedContents(&pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: tc.dt, Contents: tc.c}, "m")
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %v %v, want %v", tc.dt, got, err, tc.want)
		}
	}
	_, err := typedContents(&pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "INT8", Contents: &pb.InferTensorContents{Int64Contents: []int64{1}}}, "m")
	if err == nil || err.Error() != "unexpected explicit tensor data for input tensor 'x' for model 'm' of type 'INT64', expected datatype 'INT8'" {
		t.Fatal(err)
	}
}
