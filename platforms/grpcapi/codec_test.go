package grpcapi

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// codecRequests are encoded requests: raw contents first, last, between
// other fields, empty, and with unknown fields.
func codecRequests(t *testing.T) [][]byte {
	t.Helper()
	full, err := proto.Marshal(&pb.ModelInferRequest{
		ModelName: "m", ModelVersion: "1", Id: "id",
		Parameters: map[string]*pb.InferParameter{"k": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 3}}},
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "a", Datatype: "INT32", Shape: []int64{1, 2}},
			{Name: "b", Datatype: "BYTES", Shape: []int64{1}},
		},
		Outputs:          []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
		RawInputContents: [][]byte{{1, 2, 3, 4, 5, 6, 7, 8}, {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw := func(b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, rawInputField, protowire.BytesType), b)
	}
	name := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "model")
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 5)
	rawAsVarint := protowire.AppendVarint(protowire.AppendTag(nil, rawInputField, protowire.VarintType), 7)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		nil,
		full,
		cat(raw([]byte("first")), full),
		cat(name, raw([]byte("x")), unknown, raw(nil), name, raw([]byte("yz"))),
		cat(full, rawAsVarint, raw([]byte("after"))),
		cat(full[:len(full)-3]),                               // truncated
		cat(name, protowire.AppendTag(nil, rawInputField, 2)), // raw without its length
		cat(name, []byte{0x0a, 0x02, 0xff, 0xfe}),             // model_name not UTF-8
		cat(name, []byte{0x00}),                               // field 0
	}
}

// TestInferCodecUnmarshal: a ModelInferRequest reads as proto.Unmarshal
// reads it, error included, and its raw contents alias the message.
func TestInferCodecUnmarshal(t *testing.T) {
	cases := codecRequests(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range codecRequests(t) {
		for range 200 { // random corruptions
			if len(c) == 0 {
				break
			}
			d := bytes.Clone(c)
			d[r.IntN(len(d))] = byte(r.IntN(256))
			cases = append(cases, d[:r.IntN(len(d)+1)])
		}
	}
	for i, c := range cases {
		want := &pb.ModelInferRequest{}
		wantErr := proto.Unmarshal(c, want)
		buf := bytes.Clone(c)
		got := &pb.ModelInferRequest{ModelName: "stale", RawInputContents: [][]byte{{9}}}
		gotErr := unmarshalInferRequest(buf, got)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("case %d (%x): error %v, proto.Unmarshal's %v", i, c, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if !proto.Equal(got, want) {
			t.Fatalf("case %d (%x): got %v, want %v", i, c, got, want)
		}
		for k, b := range got.RawInputContents {
			if len(b) > 0 && !aliases(b, buf) {
				t.Errorf("case %d: raw input %d is a copy", i, k)
			}
			if (b == nil) != (want.RawInputContents[k] == nil) {
				t.Errorf("case %d: raw input %d nil %v, proto's nil %v", i, k, b == nil, want.RawInputContents[k] == nil)
			}
		}
	}
}

func aliases(b, buf []byte) bool {
	for i := range buf {
		if &buf[i] == &b[0] {
			return true
		}
	}
	return false
}

// TestInferCodecMarshal: requests and responses, small or large, the
// latter alone or in a stream response, are the bytes proto.Marshal
// writes; large raw contents are sent from their own buffers.
func TestInferCodecMarshal(t *testing.T) {
	big := bytes.Repeat([]byte{1, 2, 3}, rawMinLength)
	response := func(raw ...[]byte) *pb.ModelInferResponse {
		return &pb.ModelInferResponse{
			ModelName: "m", ModelVersion: "1", Id: "id",
			Parameters: map[string]*pb.InferParameter{"p": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}},
			Outputs: []*pb.ModelInferResponse_InferOutputTensor{
				{Name: "y", Datatype: "UINT8", Shape: []int64{int64(len(big))}},
				{Name: "z", Datatype: "UINT8", Shape: []int64{0}},
			},
			RawOutputContents: raw,
		}
	}
	request := func(raw ...[]byte) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{
			ModelName: "m", ModelVersion: "2", Id: "r",
			Parameters: map[string]*pb.InferParameter{"sequence_id": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 4}}},
			Inputs: []*pb.ModelInferRequest_InferInputTensor{
				{Name: "x", Datatype: "UINT8", Shape: []int64{int64(len(big))}},
				{Name: "s", Datatype: "UINT8", Shape: []int64{0}},
			},
			Outputs:          []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
			RawInputContents: raw,
		}
	}
	c := newInferCodec()
	for i, m := range []proto.Message{
		request(),
		request([]byte{1}, nil),
		request(big, nil),
		request(big[:9], []byte{}, big),
		response(),
		response([]byte{1, 2}, nil),
		response(big, nil),
		response(big, []byte{}, big[:7]),
		&pb.ModelStreamInferResponse{InferResponse: response(big, nil)},
		&pb.ModelStreamInferResponse{ErrorMessage: "e", InferResponse: response(big[:5], big)},
		&pb.ModelStreamInferResponse{ErrorMessage: "e", InferResponse: response([]byte{1})},
		&pb.ServerLiveResponse{Live: true},
	} {
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("case %d: %x, proto.Marshal writes %x", i, got, want)
		}
		copied := true
		for _, b := range data {
			if d := b.ReadOnlyData(); len(d) > 0 && &d[0] == &big[0] {
				copied = false
			}
		}
		if copied == (rawLength(rawOf(m)) >= rawMinLength) {
			t.Errorf("case %d: raw outputs copied %v", i, copied)
		}
		if got, err := proto.Marshal(m); err != nil || !bytes.Equal(got, want) {
			t.Errorf("case %d: message changed by Marshal", i)
		}
		data.Free()
	}

	var req pb.ModelInferRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x01, 'm'}), mem.SliceBuffer([]byte{0x3a, 0x01, 9})}, &req); err != nil ||
		req.ModelName != "m" || len(req.RawInputContents) != 1 || req.RawInputContents[0][0] != 9 {
		t.Errorf("Unmarshal over two buffers: %v, %v", &req, err)
	}
	large, err := proto.Marshal(request(big))
	if err != nil {
		t.Fatal(err)
	}
	req.Reset()
	half := len(large) / 2
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(large[:half]), mem.SliceBuffer(large[half:])}, &req); err != nil || !proto.Equal(&req, request(big)) {
		t.Errorf("Unmarshal of a large request over two buffers: %v", err)
	}
}

// rawOf is a message's raw tensor contents.
func rawOf(m proto.Message) [][]byte {
	switch m := m.(type) {
	case *pb.ModelInferRequest:
		return m.GetRawInputContents()
	case *pb.ModelInferResponse:
		return m.GetRawOutputContents()
	case *pb.ModelStreamInferResponse:
		return m.GetInferResponse().GetRawOutputContents()
	}
	return nil
}

// TestInferCodecMarshalShared: one request marshalled from several
// goroutines at once (a client sending it on many calls) is neither
// changed nor raced on (go test -race).
func TestInferCodecMarshalShared(t *testing.T) {
	req := &pb.ModelInferRequest{
		ModelName:        "m",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "UINT8", Shape: []int64{rawMinLength}}},
		RawInputContents: [][]byte{make([]byte, rawMinLength)},
	}
	want, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c := newInferCodec()
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			data, err := c.Marshal(req)
			if err == nil && !bytes.Equal(data.Materialize(), want) {
				err = fmt.Errorf("marshalled %d bytes, want %d", data.Len(), len(want))
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if len(req.RawInputContents) != 1 || len(req.RawInputContents[0]) != rawMinLength {
		t.Errorf("request changed: %d raw inputs", len(req.RawInputContents))
	}
}

// TestInferCodecUnmarshalResponse: a ModelInferResponse reads as
// proto.Unmarshal reads it, and its raw outputs alias the message.
func TestInferCodecUnmarshalResponse(t *testing.T) {
	resp := &pb.ModelInferResponse{
		ModelName: "m", ModelVersion: "1", Id: "id",
		Outputs:           []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "UINT8", Shape: []int64{3}}, {Name: "z"}},
		RawOutputContents: [][]byte{{1, 2, 3}, {}},
	}
	enc, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	c := newInferCodec()
	for i, in := range [][]byte{enc, append(bytes.Clone(enc), 0x32, 0x02, 7, 8), enc[:len(enc)-2]} {
		want := &pb.ModelInferResponse{}
		wantErr := proto.Unmarshal(in, want)
		got := &pb.ModelInferResponse{ModelName: "stale"}
		half := len(in) / 2
		gotErr := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in[:half]), mem.SliceBuffer(in[half:])}, got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("case %d: error %v, proto.Unmarshal's %v", i, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if !proto.Equal(got, want) {
			t.Errorf("case %d: got %v, want %v", i, got, want)
		}
		buf := bytes.Clone(in)
		direct := &pb.ModelInferResponse{}
		if err := unmarshalAliased(buf, direct, rawOutputField, &direct.RawOutputContents, 0); err != nil || !proto.Equal(direct, want) {
			t.Fatalf("case %d: unmarshalAliased: %v, %v", i, direct, err)
		}
		if r := direct.RawOutputContents[0]; !aliases(r, buf) || cap(r) != len(r) {
			t.Errorf("case %d: raw output is a copy, or reaches past its end", i)
		}
	}
}

// TestMaterialize: the buffers of a slice, empty ones included, in one
// buffer, as mem.BufferSlice.Materialize puts them.
func TestMaterialize(t *testing.T) {
	big := bytes.Repeat([]byte{7, 8, 9}, 20000)
	for i, data := range []mem.BufferSlice{
		{mem.SliceBuffer([]byte{1})},
		{mem.SliceBuffer(big)},
		{mem.SliceBuffer(big[:5]), mem.SliceBuffer(nil), mem.SliceBuffer(big[5:])},
		{mem.SliceBuffer(nil), mem.SliceBuffer(big[:100]), mem.SliceBuffer(big[100:16484]), mem.SliceBuffer(big[16484:])},
	} {
		got := materialize(data)
		if !bytes.Equal(got, data.Materialize()) {
			t.Errorf("case %d: %d bytes, not the slice's %d", i, len(got), data.Len())
		}
		for _, b := range data {
			if aliases(got, b.ReadOnlyData()) {
				t.Errorf("case %d: not a copy", i)
			}
		}
	}
}
