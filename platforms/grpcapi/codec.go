package grpcapi

import (
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// Field numbers of the raw tensor contents (grpc_service.proto).
const (
	rawInputField      protowire.Number = 7 // ModelInferRequest.raw_input_contents
	rawOutputField     protowire.Number = 6 // ModelInferResponse.raw_output_contents
	streamInferField   protowire.Number = 2 // ModelStreamInferResponse.infer_response
	rawOutputMinLength                  = 16 << 10
)

// inferCodec is the server's message codec: grpc-go's proto codec, with
// the tensor bytes of inference messages not copied where the proto codec
// copies them.
//
//   - A ModelInferRequest (ModelInfer, ModelStreamInfer) is read from one
//     copy of the received message, which its raw_input_contents alias;
//     the proto codec copies the message into a pooled buffer and each raw
//     input out of it again. Everything else goes through proto.Unmarshal.
//   - A ModelInferResponse, alone or in a ModelStreamInferResponse, whose
//     raw_output_contents hold at least rawOutputMinLength bytes is sent as
//     its other fields marshalled, then each raw output's tag and length
//     and the core's output buffer itself, instead of a copy of everything
//     in one buffer. raw_output_contents is the last field of both
//     messages, and infer_response the last of the stream's, so the bytes
//     sent are the ones proto.Marshal writes.
//
// Every other message goes through the proto codec unchanged.
type inferCodec struct{ proto encoding.CodecV2 }

func newInferCodec() inferCodec { return inferCodec{proto: encoding.GetCodecV2(protoenc.Name)} }

func (inferCodec) Name() string { return protoenc.Name }

func (c inferCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pb.ModelInferRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// The copy is garbage-collected memory: the request's tensors keep it
	// for as long as the core uses them.
	return unmarshalInferRequest(data.Materialize(), req)
}

// unmarshalInferRequest unmarshals buf into req as proto.Unmarshal does,
// except that raw_input_contents are subslices of buf. The fields between
// them are merged in order, which is how protobuf reads a message
// anyway; on any error the whole of buf goes through proto.Unmarshal, so
// that the error is the one it gives.
func unmarshalInferRequest(buf []byte, req *pb.ModelInferRequest) error {
	proto.Reset(req)
	merge := proto.UnmarshalOptions{Merge: true}
	var raw [][]byte
	run := 0 // start of the fields not yet unmarshalled
	for off := 0; off < len(buf); {
		num, typ, n := protowire.ConsumeTag(buf[off:])
		if n < 0 {
			return proto.Unmarshal(buf, req)
		}
		if num == rawInputField && typ == protowire.BytesType {
			b, m := protowire.ConsumeBytes(buf[off+n:])
			if m < 0 {
				return proto.Unmarshal(buf, req)
			}
			if err := merge.Unmarshal(buf[run:off], req); err != nil {
				return proto.Unmarshal(buf, req)
			}
			raw = append(raw, b[:len(b):len(b)])
			off += n + m
			run = off
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, buf[off+n:])
		if m < 0 {
			return proto.Unmarshal(buf, req)
		}
		off += n + m
	}
	if err := merge.Unmarshal(buf[run:], req); err != nil {
		return proto.Unmarshal(buf, req)
	}
	req.RawInputContents = raw
	return nil
}

func (c inferCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *pb.ModelInferResponse:
		if rawLength(m) >= rawOutputMinLength {
			return c.marshalInferResponse(m)
		}
	case *pb.ModelStreamInferResponse:
		if rawLength(m.GetInferResponse()) >= rawOutputMinLength {
			return c.marshalStreamResponse(m)
		}
	}
	return c.proto.Marshal(v)
}

// rawLength is the length of resp's raw output contents.
func rawLength(resp *pb.ModelInferResponse) int {
	n := 0
	for _, r := range resp.GetRawOutputContents() {
		n += len(r)
	}
	return n
}

// marshalInferResponse is resp's other fields marshalled by the proto
// codec, then its raw outputs, each tag and length then the buffer itself.
// resp is the call's own and nothing reads it meanwhile: its raw outputs
// are set aside while the rest is marshalled.
func (c inferCodec) marshalInferResponse(resp *pb.ModelInferResponse) (mem.BufferSlice, error) {
	raw := resp.RawOutputContents
	head, err := marshalWithout(c, resp, &resp.RawOutputContents)
	if err != nil {
		return nil, err
	}
	out := make(mem.BufferSlice, 0, len(head)+2*len(raw))
	return appendRawOutputs(append(out, head...), raw), nil
}

// marshalStreamResponse is marshalInferResponse for a stream's response:
// its error message, then infer_response's tag and length, then the
// response as marshalInferResponse sends it.
func (c inferCodec) marshalStreamResponse(sr *pb.ModelStreamInferResponse) (mem.BufferSlice, error) {
	resp := sr.InferResponse
	outer, err := marshalWithout(c, sr, &sr.InferResponse)
	if err != nil {
		return nil, err
	}
	inner, err := c.marshalInferResponse(resp)
	if err != nil {
		outer.Free()
		return nil, err
	}
	tag := protowire.AppendTag(nil, streamInferField, protowire.BytesType)
	tag = protowire.AppendVarint(tag, uint64(inner.Len()))
	out := make(mem.BufferSlice, 0, len(outer)+1+len(inner))
	out = append(append(out, outer...), mem.SliceBuffer(tag))
	return append(out, inner...), nil
}

// marshalWithout marshals m with *field set aside (zero), then puts the
// field back.
func marshalWithout[T any](c inferCodec, m any, field *T) (mem.BufferSlice, error) {
	saved := *field
	var zero T
	*field = zero
	defer func() { *field = saved }()
	return c.proto.Marshal(m)
}

// appendRawOutputs appends each raw output as its tag and length, then the
// output's own buffer (the core's, not copied).
func appendRawOutputs(out mem.BufferSlice, raw [][]byte) mem.BufferSlice {
	hdrs := make([]byte, 0, len(raw)*(1+protowire.SizeVarint(1<<63)))
	for _, r := range raw {
		start := len(hdrs)
		hdrs = protowire.AppendTag(hdrs, rawOutputField, protowire.BytesType)
		hdrs = protowire.AppendVarint(hdrs, uint64(len(r)))
		out = append(out, mem.SliceBuffer(hdrs[start:len(hdrs):len(hdrs)]))
		if len(r) > 0 {
			out = append(out, mem.SliceBuffer(r))
		}
	}
	return out
}
