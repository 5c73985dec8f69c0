package grpcapi

import (
	"bytes"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// Field numbers of the raw tensor contents (grpc_service.proto).
const (
	rawInputField    protowire.Number = 7 // ModelInferRequest.raw_input_contents
	rawOutputField   protowire.Number = 6 // ModelInferResponse.raw_output_contents
	streamInferField protowire.Number = 2 // ModelStreamInferResponse.infer_response
	rawMinLength                      = 16 << 10
)

// inferCodec is the message codec of the server and of DialOptions'
// clients: grpc-go's proto codec, with the tensor bytes of inference
// messages not copied where the proto codec copies them.
//
//   - A ModelInferRequest or ModelInferResponse of at least rawMinLength
//     bytes is read from one copy of the received message, which its raw
//     contents alias; the proto codec copies the message into a pooled
//     buffer and each raw content out of it again. Everything else goes
//     through the proto codec.
//   - The server's ModelInfer and ModelStreamInfer requests arrive as a
//     wireRequest, read as unmarshalWireRequest reads it: scanned before
//     they are decoded, and refused unread when their entries would cost
//     far more memory than their size.
//   - A ModelInferRequest or ModelInferResponse, the latter alone or in a
//     ModelStreamInferResponse, whose raw contents hold at least
//     rawMinLength bytes is sent as its other fields marshalled, then each
//     raw content's tag and length and the tensor's buffer itself, instead
//     of a copy of everything in one buffer. The raw contents are the last
//     field of both messages, and infer_response the last of the stream's,
//     so the bytes sent are the ones proto.Marshal writes (unknown fields,
//     which proto.Marshal writes last, come before them). The message is
//     not changed: a client may send one request from many goroutines.
//
// Every other message goes through the proto codec unchanged.
type inferCodec struct{ proto encoding.CodecV2 }

func newInferCodec() inferCodec { return inferCodec{proto: encoding.GetCodecV2(protoenc.Name)} }

func (inferCodec) Name() string { return protoenc.Name }

func (c inferCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if w, ok := v.(*wireRequest); ok {
		return unmarshalWireRequest(data, w)
	}
	if data.Len() < rawMinLength {
		// Copying a small message's bytes out costs less than a copy of
		// the message and unmarshalling it in runs.
		return c.proto.Unmarshal(data, v)
	}
	switch m := v.(type) {
	case *pb.ModelInferRequest:
		// A request read as the generated type (a stream behind an
		// embedder's interceptor) is scanned first all the same.
		buf := materialize(data)
		sc, err := scanRequest(buf)
		if err != nil {
			return err
		}
		if err := sc.refusal(); err != nil {
			return err
		}
		return unmarshalAliased(buf, m, rawInputField, &m.RawInputContents, 0)
	case *pb.ModelInferResponse:
		return unmarshalAliased(materialize(data), m, rawOutputField, &m.RawOutputContents, 0)
	}
	return c.proto.Unmarshal(data, v)
}

// materialize is data in one new buffer, as data.Materialize, but not
// cleared before it is filled (bytes.Join allocates without clearing; a 4
// MiB tensor's clearing was 4% of the server's CPU). The copy is
// garbage-collected memory: the message's tensors keep it for as long as
// they are used.
func materialize(data mem.BufferSlice) []byte {
	parts := make([][]byte, len(data))
	for i, b := range data {
		parts[i] = b.ReadOnlyData()
	}
	return bytes.Join(parts, nil)
}

// unmarshalInferRequest is unmarshalAliased for a request.
func unmarshalInferRequest(buf []byte, req *pb.ModelInferRequest) error {
	return unmarshalAliased(buf, req, rawInputField, &req.RawInputContents, 0)
}

// unmarshalAliased unmarshals buf into m as proto.Unmarshal does, except
// that the bytes field number field, which is *raw, holds subslices of buf.
// The fields between them are merged in order, which is how protobuf reads
// a message anyway; on any error the whole of buf goes through
// proto.Unmarshal, so that the error is the one it gives. n, when known,
// is how many raw contents buf holds.
func unmarshalAliased(buf []byte, m proto.Message, field protowire.Number, raw *[][]byte, n int) error {
	proto.Reset(m)
	merge := proto.UnmarshalOptions{Merge: true}
	var got [][]byte
	if n > 0 {
		got = make([][]byte, 0, n)
	}
	run := 0 // start of the fields not yet unmarshalled
	for off := 0; off < len(buf); {
		num, typ, n := protowire.ConsumeTag(buf[off:])
		if n < 0 {
			return proto.Unmarshal(buf, m)
		}
		if num == field && typ == protowire.BytesType {
			b, k := protowire.ConsumeBytes(buf[off+n:])
			if k < 0 {
				return proto.Unmarshal(buf, m)
			}
			if run < off {
				if err := merge.Unmarshal(buf[run:off], m); err != nil {
					return proto.Unmarshal(buf, m)
				}
			}
			got = append(got, b[:len(b):len(b)])
			off += n + k
			run = off
			continue
		}
		k := protowire.ConsumeFieldValue(num, typ, buf[off+n:])
		if k < 0 {
			return proto.Unmarshal(buf, m)
		}
		off += n + k
	}
	if err := merge.Unmarshal(buf[run:], m); err != nil {
		return proto.Unmarshal(buf, m)
	}
	*raw = got
	return nil
}

func (c inferCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *pb.ModelInferRequest:
		if rawLength(m.GetRawInputContents()) >= rawMinLength {
			return c.marshalRaw(m, rawInputField, m.RawInputContents)
		}
	case *pb.ModelInferResponse:
		if rawLength(m.GetRawOutputContents()) >= rawMinLength {
			return c.marshalRaw(m, rawOutputField, m.RawOutputContents)
		}
	case *pb.ModelStreamInferResponse:
		if rawLength(m.GetInferResponse().GetRawOutputContents()) >= rawMinLength {
			return c.marshalStreamResponse(m)
		}
	}
	return c.proto.Marshal(v)
}

// rawLength is the length of a message's raw contents.
func rawLength(raw [][]byte) int {
	n := 0
	for _, r := range raw {
		n += len(r)
	}
	return n
}

// marshalRaw is m's fields but field (raw) marshalled by the proto codec,
// then each of raw as its tag and length and the buffer itself.
func (c inferCodec) marshalRaw(m proto.Message, field protowire.Number, raw [][]byte) (mem.BufferSlice, error) {
	head, err := c.proto.Marshal(without(m, field))
	if err != nil {
		return nil, err
	}
	out := make(mem.BufferSlice, 0, len(head)+2*len(raw))
	return appendRaw(append(out, head...), field, raw), nil
}

// marshalStreamResponse is marshalRaw for a stream's response: its error
// message, then infer_response's tag and length, then the response as
// marshalRaw sends it.
func (c inferCodec) marshalStreamResponse(sr *pb.ModelStreamInferResponse) (mem.BufferSlice, error) {
	resp := sr.InferResponse
	outer, err := c.proto.Marshal(without(sr, streamInferField))
	if err != nil {
		return nil, err
	}
	inner, err := c.marshalRaw(resp, rawOutputField, resp.RawOutputContents)
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

// without is a new message of m's type holding m's fields (shared, not
// copied) and unknown fields, except field number field.
func without(m proto.Message, field protowire.Number) proto.Message {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != field {
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(src.GetUnknown())
	return dst.Interface()
}

// appendRaw appends each of raw as field number field's tag and length,
// then the buffer itself (not copied).
func appendRaw(out mem.BufferSlice, field protowire.Number, raw [][]byte) mem.BufferSlice {
	hdrs := make([]byte, 0, len(raw)*(1+protowire.SizeVarint(1<<63)))
	for _, r := range raw {
		start := len(hdrs)
		hdrs = protowire.AppendTag(hdrs, field, protowire.BytesType)
		hdrs = protowire.AppendVarint(hdrs, uint64(len(r)))
		out = append(out, mem.SliceBuffer(hdrs[start:len(hdrs):len(hdrs)]))
		if len(r) > 0 {
			out = append(out, mem.SliceBuffer(r))
		}
	}
	return out
}
