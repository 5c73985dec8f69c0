package grpcapi

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// wireMessage is a message's wire bytes, which wireCodec sends as they are.
type wireMessage []byte

// wireCodec is a client codec that sends a wireMessage as it is (a
// hostile request built by hand, which protobuf would take long to build)
// and reads replies as DialOptions' codec reads them.
type wireCodec struct{ inferCodec }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(wireMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(w)}, nil
	}
	return c.inferCodec.Marshal(v)
}

// wireInfer sends wire as a ModelInfer request.
func wireInfer(t *testing.T, conn *grpc.ClientConn, wire []byte) (*pb.ModelInferResponse, error) {
	t.Helper()
	resp := new(pb.ModelInferResponse)
	err := conn.Invoke(ctx(t), pb.GRPCInferenceService_ModelInfer_FullMethodName, wireMessage(wire), resp,
		grpc.ForceCodecV2(wireCodec{newInferCodec()}), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	return resp, err
}

// wireStreamInfer sends wire as a ModelStreamInfer request and reads its
// one response.
func wireStreamInfer(t *testing.T, conn *grpc.ClientConn, wire []byte) (*pb.ModelStreamInferResponse, error) {
	t.Helper()
	st, err := conn.NewStream(ctx(t), &pb.GRPCInferenceService_ServiceDesc.Streams[0], pb.GRPCInferenceService_ModelStreamInfer_FullMethodName,
		grpc.ForceCodecV2(wireCodec{newInferCodec()}), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	servertest.Must(t, err)
	servertest.Must(t, st.SendMsg(wireMessage(wire)))
	servertest.Must(t, st.CloseSend())
	resp := new(pb.ModelStreamInferResponse)
	return resp, st.RecvMsg(resp)
}

// allocated is how many bytes the process allocated while f ran
// (runtime.MemStats.TotalAlloc: the server's and the client's, garbage
// included).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// appendField appends field num's value v: bytes for a []byte or string,
// a varint for a uint64.
func appendField(b []byte, num protowire.Number, v any) []byte {
	switch v := v.(type) {
	case string:
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
	case []byte:
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	case uint64:
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	}
	panic(fmt.Sprintf("appendField: %T", v))
}

// hostileRequest is a ModelInferRequest's wire bytes: model, id "hostile"
// and the given fields (each already a field's tag and value), n times.
func hostileRequest(model string, field []byte, n int) []byte {
	b := appendField(appendField(nil, reqModelName, model), reqID, "hostile")
	return append(b, bytes.Repeat(field, n)...)
}

// hostileInput is an inputs field: INPUT0 of datatype and shape, with
// contents of entry (a field's tag and value) n times.
func hostileInput(datatype string, shape []int64, entry []byte, n int) []byte {
	in := appendField(appendField(nil, tensorName, "INPUT0"), tensorDatatype, datatype)
	for _, d := range shape {
		in = appendField(in, tensorShape, uint64(d))
	}
	in = appendField(in, tensorContents, bytes.Repeat(entry, n))
	return appendField(nil, reqInputs, in)
}

// emptyBytes is one empty bytes_contents entry: 2 bytes on the wire.
var emptyBytes = appendField(nil, contentsBytes, []byte{})

// packedZeros is a packed run of n zero varints of contents field num: a
// byte each.
func packedZeros(num protowire.Number, n int) []byte {
	return appendField(nil, num, make([]byte, n))
}

// identityRepo has in-Go identity models id_<DATATYPE> of one INPUT0 with
// a variable dimension, for BYTES, INT64 and FP32.
func identityRepo(t *testing.T) string {
	root := t.TempDir()
	for _, dt := range []core.DataType{core.TypeBytes, core.TypeInt64, core.TypeFP32} {
		servertest.WriteModel(t, filepath.Join(root, "id_"+dt.String()), servertest.Model{Config: fmt.Sprintf(`backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: %s dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: %s dims: [ -1 ] } ]
`, dt.ConfigName(), dt.ConfigName())})
	}
	return root
}

// TestHostileEntriesRefusedUndecoded: requests of millions of cheap
// entries (2 bytes or less each on the wire) are refused with
// INVALID_ARGUMENT, over ModelInfer and in-band over ModelStreamInfer,
// while the process allocates no more than three times their size and a
// MiB (the received frames, the copy of the message): the codec counts
// the entries before it decodes anything. Decoded, such a request took 24
// bytes of slice header per empty bytes_contents, 8 per int64 and per
// shape dimension, over 300 per empty input, and more for the slices'
// growth (55 to 90 times its size, measured). Then the server still
// answers.
func TestHostileEntriesRefusedUndecoded(t *testing.T) {
	h := start(t, servertest.Options{Repo: identityRepo(t)}, Options{})
	const m = 1 << 20
	cases := []struct {
		name string
		wire []byte
		want string
	}{
		{"4M empty bytes_contents for shape [1]",
			hostileRequest("id_BYTES", hostileInput("BYTES", []int64{1}, emptyBytes, 4*m), 1),
			"[request id: hostile] expected 1 string elements for inference input 'INPUT0' for model 'id_BYTES', got 4194304"},
		{"8M packed int64_contents for shape [2]",
			hostileRequest("id_INT64", hostileInput("INT64", []int64{2}, packedZeros(3, 8*m), 1), 1),
			"[request id: hostile] input byte size mismatch for input 'INPUT0' for model 'id_INT64'. Expected 16, got 67108864"},
		{"4M empty bytes_contents for an FP32 input",
			hostileRequest("id_FP32", hostileInput("FP32", []int64{4}, emptyBytes, 4*m), 1),
			"unexpected explicit tensor data for input tensor 'INPUT0' for model 'id_FP32' of type 'BYTES', expected datatype 'FP32'"},
		{"bytes_contents for a shape that overflows",
			hostileRequest("id_BYTES", hostileInput("BYTES", []int64{1 << 62, 4}, emptyBytes, 4*m), 1),
			"[request id: hostile] invalid shape for input 'INPUT0': shape [4611686018427387904,4] causes total element count to exceed maximum size of 9223372036854775807"},
		{"2M empty inputs",
			hostileRequest("id_BYTES", appendField(nil, reqInputs, []byte{}), 2*m),
			"[request id: hostile] request of %d bytes has too many entries to decode: 2097152 inputs, 0 outputs, 0 parameters, 0 shape dimensions, 0 raw_input_contents"},
		{"an input of 8M shape dimensions",
			hostileRequest("id_BYTES", appendField(nil, reqInputs, packedZeros(tensorShape, 8*m)), 1),
			"[request id: hostile] request of %d bytes has too many entries to decode: 1 inputs, 0 outputs, 0 parameters, 8388608 shape dimensions, 0 raw_input_contents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, err = wireInfer(t, h.conn, c.wire) })
			want := c.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, len(c.wire))
			}
			wantStatus(t, err, codes.InvalidArgument, want)
			if limit := 3*uint64(len(c.wire)) + 1<<20; alloc > limit {
				t.Errorf("a request of %d bytes allocated %d bytes, more than %d", len(c.wire), alloc, limit)
			}
			var resp *pb.ModelStreamInferResponse
			alloc = allocated(func() { resp, err = wireStreamInfer(t, h.conn, c.wire) })
			servertest.Must(t, err)
			if resp.GetErrorMessage() != want {
				t.Errorf("stream: %q, want %q", resp.GetErrorMessage(), want)
			}
			if limit := 3*uint64(len(c.wire)) + 1<<20; alloc > limit {
				t.Errorf("stream: a request of %d bytes allocated %d bytes, more than %d", len(c.wire), alloc, limit)
			}
		})
	}
	resp, err := h.client.ModelInfer(ctx(t), &pb.ModelInferRequest{ModelName: "id_BYTES",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "BYTES", Shape: []int64{2},
			Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("ab"), {}}}}}})
	servertest.Must(t, err)
	if got := resp.GetRawOutputContents(); len(got) != 1 || !bytes.Equal(got[0], []byte{2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0}) {
		t.Fatalf("after the hostile requests: %v", got)
	}
}

// TestManyBytesContentsDecodeFlat: a BYTES input of 2M empty strings in
// bytes_contents whose shape says so is answered, and the process
// allocates a small multiple of the request's size for it (the copy of the
// message, the tensor, the response the client reads, the transports'
// buffers; 8x measured, 76x before): the codec writes the strings straight
// into the tensor's layout, 4 bytes each, where protobuf made a 24-byte
// slice header of each and grew their slice.
func TestManyBytesContentsDecodeFlat(t *testing.T) {
	h := start(t, servertest.Options{Repo: identityRepo(t)}, Options{})
	const n = 2 << 20
	wire := hostileRequest("id_BYTES", hostileInput("BYTES", []int64{n}, emptyBytes, n), 1)
	var resp *pb.ModelInferResponse
	var err error
	alloc := allocated(func() { resp, err = wireInfer(t, h.conn, wire) })
	servertest.Must(t, err)
	if got := resp.GetRawOutputContents(); len(got) != 1 || len(got[0]) != 4*n || bytes.ContainsFunc(got[0], func(r rune) bool { return r != 0 }) {
		t.Fatalf("the identity's answer is not %d empty strings", n)
	}
	if limit := 12 * uint64(len(wire)); alloc > limit {
		t.Errorf("a request of %d bytes allocated %d bytes, more than %d", len(wire), alloc, limit)
	}
	st, err := h.client.ModelStreamInfer(ctx(t), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	servertest.Must(t, err)
	servertest.Must(t, st.SendMsg(&pb.ModelInferRequest{ModelName: "id_BYTES", Id: "s",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "BYTES", Shape: []int64{3},
			Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("x"), {}, []byte("yz")}}}}}))
	sresp, err := st.Recv()
	servertest.Must(t, err)
	if got := sresp.GetInferResponse().GetRawOutputContents(); sresp.GetErrorMessage() != "" || len(got) != 1 ||
		!bytes.Equal(got[0], []byte{1, 0, 0, 0, 'x', 0, 0, 0, 0, 2, 0, 0, 0, 'y', 'z'}) {
		t.Fatalf("stream: %q %v", sresp.GetErrorMessage(), got)
	}
}
