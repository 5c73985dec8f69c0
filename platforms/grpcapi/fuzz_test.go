package grpcapi

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// FuzzModelInferRequest reads arbitrary bytes as the server's codec reads
// a ModelInferRequest (unmarshalWireRequest) and converts the request as
// ModelInfer does, beside protobuf's decoding of the same bytes and the
// conversion of that: nothing panics; the codec decodes what protobuf
// decodes and nothing else; a request it refuses unread is one whose
// conversion fails or whose tensors do not fit their shapes; any other
// converts as protobuf's does, to the same error or the same tensors.
// Every error is a classified core error whose status is one Triton
// answers with.
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
	// More bytes_contents than the shape's elements: refused unread
	// (testdata/fuzz/FuzzModelInferRequest holds one of thousands).
	seeds = append(seeds, &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "IN", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: make([][]byte, 3)}}}})
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w wireRequest
		werr := unmarshalWireRequest(mem.BufferSlice{mem.SliceBuffer(data)}, &w)
		var in pb.ModelInferRequest
		if perr := proto.Unmarshal(data, &in); perr != nil {
			if werr == nil && w.refused == nil {
				t.Fatalf("the codec decoded what protobuf refuses (%v)", perr)
			}
			return
		}
		if werr != nil {
			t.Fatalf("the codec refused what protobuf decodes: %v", werr)
		}
		req, _, _, err := inferRequest(&in, nil, nil)
		checkConversionError(t, err)
		if w.refused != nil {
			checkConversionError(t, w.refused)
			if err == nil && fitShapes(req) {
				t.Fatalf("refused unread (%v), but it converts and its tensors fit their shapes", w.refused)
			}
			return
		}
		wreq, _, _, werr := wireInferRequest(&w, nil, nil)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("the codec's request converts to %v, protobuf's to %v", werr, err)
		}
		if err != nil {
			return
		}
		if len(req.Inputs) != len(in.GetInputs()) || len(wreq.Inputs) != len(req.Inputs) || len(wreq.Outputs) != len(req.Outputs) {
			t.Fatalf("%d and %d inputs from %d", len(wreq.Inputs), len(req.Inputs), len(in.GetInputs()))
		}
		for i, t0 := range req.Inputs {
			t1 := wreq.Inputs[i]
			if t0.Data == nil || t1.Name != t0.Name || t1.DataType != t0.DataType || !slices.Equal(t1.Shape, t0.Shape) || !bytes.Equal(t1.Data, t0.Data) {
				t.Fatalf("input %d: the codec's %+v, protobuf's %+v", i, t1, t0)
			}
		}
	})
}

// checkConversionError checks that err, when not nil, is a classified core
// error whose gRPC status is one Triton answers a conversion with.
func checkConversionError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("unclassified error %v", err)
	}
	allowed := map[codes.Code]bool{codes.InvalidArgument: true, codes.NotFound: true, codes.Unimplemented: true}
	if st, _ := status.FromError(statusError(err)); !allowed[st.Code()] || st.Message() != err.Error() {
		t.Fatalf("status %v %q for %v", st.Code(), st.Message(), err)
	}
}

// fitShapes reports whether every input of req holds exactly the elements
// its shape declares, as the core requires (core/validate.go).
func fitShapes(req *core.InferRequest) bool {
	for _, t := range req.Inputs {
		n := core.ElementCount(t.Shape)
		if n < 0 || slices.ContainsFunc(t.Shape, func(d int64) bool { return d < 0 }) {
			return false
		}
		if t.DataType == core.TypeBytes {
			if core.CountBytesElements(t.Data) != n {
				return false
			}
			continue
		}
		size := int64(t.DataType.ByteSize())
		if size <= 0 || n > math.MaxInt64/size || int64(len(t.Data)) != n*size {
			return false
		}
	}
	return true
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
		got, err := typedContents(&pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: tc.dt, Contents: tc.c}, "m", nil)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %v %v, want %v", tc.dt, got, err, tc.want)
		}
	}
	_, err := typedContents(&pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "INT8", Contents: &pb.InferTensorContents{Int64Contents: []int64{1}}}, "m", nil)
	if err == nil || err.Error() != "unexpected explicit tensor data for input tensor 'x' for model 'm' of type 'INT64', expected datatype 'INT8'" {
		t.Fatal(err)
	}
}
