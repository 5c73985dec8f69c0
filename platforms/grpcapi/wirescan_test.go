package grpcapi

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestScanCountsAsProtobuf: the scan counts what protobuf decodes from the
// same bytes, however the fields come: shapes and contents in several
// packed and unpacked pieces, contents messages merged, fields of a known
// number but another wire type (unknown fields to protobuf), and entries
// at every level. The codec's decoding then equals protobuf's but for the
// flattened bytes_contents.
func TestScanCountsAsProtobuf(t *testing.T) {
	varint := func(num protowire.Number, v uint64) []byte { return appendField(nil, num, v) }
	fixed32 := protowire.AppendFixed32(protowire.AppendTag(nil, contentsFP32, protowire.Fixed32Type), 7)
	param := appendField(nil, tensorParameters, appendField(nil, 1, "k"))
	cases := []struct {
		name  string
		input []byte // an InferInputTensor's fields
		extra []byte // more of the request's fields
	}{
		{"shape packed, then one value, then packed", bytes.Join([][]byte{
			appendField(nil, tensorShape, []byte{2, 3}), varint(tensorShape, 4), appendField(nil, tensorShape, []byte{5})}, nil), nil},
		{"contents in two messages, packed and not", bytes.Join([][]byte{
			appendField(nil, tensorContents, bytes.Join([][]byte{appendField(nil, 3, []byte{1, 0x81, 1}), varint(3, 9)}, nil)),
			appendField(nil, tensorContents, bytes.Join([][]byte{fixed32, appendField(nil, contentsFP32, make([]byte, 8)), emptyBytes, appendField(nil, contentsBytes, "xyz")}, nil)),
		}, nil), nil},
		{"known numbers of another wire type", bytes.Join([][]byte{
			protowire.AppendFixed64(protowire.AppendTag(nil, tensorShape, protowire.Fixed64Type), 1),
			varint(tensorContents, 3), varint(tensorName, 1),
			appendField(nil, tensorContents, bytes.Join([][]byte{varint(contentsBytes, 1), protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 1)}, nil)),
		}, nil), varint(reqInputs, 4)},
		{"parameters, outputs and raw contents", param,
			bytes.Join([][]byte{appendField(nil, reqParameters, []byte{}), appendField(nil, reqOutputs, param), appendField(nil, rawInputField, "r"), emptyBytes}, nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// INT64 of 100 elements or more: contents within the shape.
			input := append(appendField(appendField(nil, tensorDatatype, "INT64"), tensorShape, []byte{100}), c.input...)
			wire := append(appendField(appendField(nil, reqModelName, "m"), reqInputs, input), c.extra...)
			var want pb.ModelInferRequest
			servertest.Must(t, proto.Unmarshal(wire, &want))
			sc, err := scanRequest(wire)
			servertest.Must(t, err)
			in, err := scanInput(input)
			servertest.Must(t, err)
			w := want.GetInputs()[0]
			wc := w.GetContents()
			params := len(want.GetParameters()) + len(w.GetParameters())
			for _, o := range want.GetOutputs() {
				params += len(o.GetParameters())
			}
			got := [...]int64{sc.inputs, sc.outputs, sc.parameters, sc.raw, sc.dims,
				in.counts[1], in.counts[2], in.counts[3], in.counts[4], in.counts[5], in.counts[6], in.counts[7], in.counts[8]}
			decoded := [...]int{len(want.GetInputs()), len(want.GetOutputs()), params, len(want.GetRawInputContents()), len(w.GetShape()),
				len(wc.GetBoolContents()), len(wc.GetIntContents()), len(wc.GetInt64Contents()), len(wc.GetUintContents()),
				len(wc.GetUint64Contents()), len(wc.GetFp32Contents()), len(wc.GetFp64Contents()), len(wc.GetBytesContents())}
			for i := range got {
				if got[i] != int64(decoded[i]) {
					t.Fatalf("scanned %v, protobuf decodes %v", got, decoded)
				}
			}

			var wr wireRequest
			servertest.Must(t, unmarshalWireRequest(mem.BufferSlice{mem.SliceBuffer(wire)}, &wr))
			if wr.refused != nil {
				t.Fatal(wr.refused)
			}
			var flat []byte // bytes_contents as the tensor's data
			for _, e := range wc.GetBytesContents() {
				flat = append(binary.LittleEndian.AppendUint32(flat, uint32(len(e))), e...)
			}
			var gotFlat []byte
			if f := wr.flat(0); f != nil {
				gotFlat = f.data
			}
			if wc != nil {
				wc.BytesContents = nil
			}
			if !proto.Equal(wr.msg, &want) || !bytes.Equal(gotFlat, flat) {
				t.Fatalf("the codec decoded %v and %q, protobuf %v and %q", wr.msg, gotFlat, &want, flat)
			}
		})
	}
}

// TestScanRefusesMalformed: what the scan cannot walk is refused as
// protobuf refuses it, never refused for its shape instead.
func TestScanRefusesMalformed(t *testing.T) {
	cases := map[string][]byte{
		"a cut tag":                 {0x80},
		"an input cut short":        {0x2a, 0x05, 0x0a},
		"a packed shape cut short":  appendField(nil, reqInputs, appendField(nil, tensorShape, []byte{0x81})),
		"packed fp32 of 5 bytes":    appendField(nil, reqInputs, appendField(nil, tensorContents, appendField(nil, contentsFP32, make([]byte, 5)))),
		"a cut packed int64 varint": appendField(nil, reqInputs, appendField(nil, tensorContents, appendField(nil, 3, []byte{1, 0xff}))),
	}
	for name, wire := range cases {
		t.Run(name, func(t *testing.T) {
			var w wireRequest
			err := unmarshalWireRequest(mem.BufferSlice{mem.SliceBuffer(wire)}, &w)
			if err == nil || !strings.Contains(err.Error(), "cannot parse invalid wire-format data") {
				t.Fatalf("got %v, refused %v", err, w.refused)
			}
			if proto.Unmarshal(wire, &pb.ModelInferRequest{}) == nil {
				t.Fatal("protobuf decodes it")
			}
		})
	}
}
