package grpcapi

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// wireRequest is a ModelInferRequest as the server's codec reads it
// (unmarshalWireRequest), or as a caller decoded it (msg alone).
type wireRequest struct {
	msg *pb.ModelInferRequest
	// bytes are the inputs' bytes_contents (index: the input's), in the
	// layout of a BYTES tensor's data; the codec leaves them out of msg,
	// whose contents are otherwise all there. Nil when no input had any.
	bytes []flatBytes
	// refused is set on a request refused before it was decoded: msg then
	// holds its model name, version and id alone.
	refused error
	// decoded is msg as the codec decodes it: one allocation for both.
	decoded pb.ModelInferRequest
}

// flatBytes is one input's bytes_contents as a BYTES tensor's data: each
// entry's length (4 bytes, little-endian), then its bytes.
type flatBytes struct {
	n    int64 // entries
	data []byte
}

// plainRequest is a request decoded by protobuf, as its caller hands it over.
func plainRequest(in *pb.ModelInferRequest) *wireRequest { return &wireRequest{msg: in} }

// flat is input i's bytes_contents as the codec flattened them; nil when it
// came decoded by protobuf.
func (w *wireRequest) flat(i int) *flatBytes {
	if i < len(w.bytes) {
		return &w.bytes[i]
	}
	return nil
}

// errInvalidUTF8 is protobuf's refusal of a string that is not UTF-8.
var errInvalidUTF8 = errors.New("proto: string field contains invalid UTF-8")

// unmarshalWireRequest decodes a ModelInferRequest into w after a scan of
// its wire bytes (scanRequest), which allocates nothing:
//
//   - A request whose entries (inputs, outputs, parameters, shape
//     dimensions, raw contents) would cost more to decode than twice its
//     size and some more (overBudget), or whose typed contents hold more
//     elements than an input's shape declares, is not decoded: w.refused
//     says why, in the words the conversion or the core would use after
//     decoding it. A message of N empty bytes_contents, 2N bytes, once
//     took protobuf 24N bytes of slice headers and more for their growth.
//   - An input's bytes_contents go to w.bytes in the tensor's layout
//     (4 bytes an entry and its bytes) instead of a slice header each.
//   - The rest decodes as inferCodec decodes a request: raw contents
//     aliasing one copy of a large message, everything copied out of a
//     small one.
func unmarshalWireRequest(data mem.BufferSlice, w *wireRequest) error {
	proto.Reset(&w.decoded)
	w.msg, w.bytes, w.refused = &w.decoded, nil, nil
	var buf []byte
	small := data.Len() < rawMinLength
	if small {
		b := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer b.Free()
		buf = b.ReadOnlyData()
	} else {
		buf = materialize(data)
	}
	sc, err := scanRequest(buf)
	if err != nil {
		return err
	}
	if refused := sc.refusal(); refused != nil {
		if !utf8.Valid(sc.model) || !utf8.Valid(sc.version) || !utf8.Valid(sc.id) {
			return errInvalidUTF8
		}
		w.msg.ModelName, w.msg.ModelVersion, w.msg.Id = string(sc.model), string(sc.version), string(sc.id)
		w.refused = refused
		return nil
	}
	if sc.bytesWire > 0 {
		if buf, w.bytes, err = stripBytesContents(buf, sc.bytesWire); err != nil {
			return err
		}
	}
	if small {
		return proto.Unmarshal(buf, w.msg)
	}
	return unmarshalAliased(buf, w.msg, rawInputField, &w.msg.RawInputContents, int(sc.raw))
}

// refusal is why the scanned request is refused before it is decoded, or
// nil: too many entries for its size first, then the first input whose
// contents exceed its shape.
func (sc *requestScan) refusal() error {
	if err := sc.overBudget(); err != nil {
		return err
	}
	if sc.exceeds {
		return sc.over.refusal(string(sc.model), string(sc.id))
	}
	return nil
}

// stripBytesContents copies buf, a ModelInferRequest, without its inputs'
// bytes_contents, which it returns flattened, one per input in the order
// of the message's inputs. Every other byte is copied as it is, so the
// copy decodes to what buf decodes to, but for those entries. The copy
// takes no more than buf less the entries (bytesWire), since a length
// that shrinks never takes more bytes.
func stripBytesContents(buf []byte, bytesWire int64) ([]byte, []flatBytes, error) {
	out := make([]byte, 0, int64(len(buf))-bytesWire)
	var flat []flatBytes
	for len(buf) > 0 {
		num, typ, val, n := consumeField(buf)
		if n < 0 {
			return nil, nil, errMalformed
		}
		if num == reqInputs && typ == protowire.BytesType {
			var f flatBytes
			var err error
			if out, f, err = stripInput(out, val); err != nil {
				return nil, nil, err
			}
			flat = append(flat, f)
		} else {
			out = append(out, buf[:n]...)
		}
		buf = buf[n:]
	}
	return out, flat, nil
}

// stripInput appends an inputs field of the InferInputTensor msg without
// its bytes_contents to out, and returns them flattened. msg was scanned:
// it is well formed.
func stripInput(out, msg []byte) ([]byte, flatBytes, error) {
	in, err := scanInput(msg)
	if err != nil {
		return nil, flatBytes{}, err
	}
	f := flatBytes{n: in.counts[contentsBytes]}
	out = protowire.AppendTag(out, reqInputs, protowire.BytesType)
	if f.n == 0 {
		return protowire.AppendBytes(out, msg), f, nil
	}
	// The tensor's length without the entries, then the tensor.
	size := 0
	for b := msg; len(b) > 0; {
		num, typ, val, n := consumeField(b)
		if num == tensorContents && typ == protowire.BytesType {
			size += protowire.SizeTag(tensorContents) + protowire.SizeBytes(len(val)-int(bytesEntriesWire(val)))
		} else {
			size += n
		}
		b = b[n:]
	}
	out = protowire.AppendVarint(out, uint64(size))
	f.data = make([]byte, 0, 4*f.n+in.bytesLen)
	for len(msg) > 0 {
		num, typ, val, n := consumeField(msg)
		if num == tensorContents && typ == protowire.BytesType {
			out = protowire.AppendTag(out, tensorContents, protowire.BytesType)
			out = protowire.AppendVarint(out, uint64(len(val)-int(bytesEntriesWire(val))))
			out, f.data = splitContents(out, f.data, val)
		} else {
			out = append(out, msg[:n]...)
		}
		msg = msg[n:]
	}
	return out, f, nil
}

// bytesEntriesWire is how many bytes an InferTensorContents' bytes_contents
// entries take on the wire, tags included.
func bytesEntriesWire(msg []byte) int64 {
	var size int64
	for len(msg) > 0 {
		num, typ, _, n := consumeField(msg)
		if num == contentsBytes && typ == protowire.BytesType {
			size += int64(n)
		}
		msg = msg[n:]
	}
	return size
}

// splitContents appends an InferTensorContents' fields but bytes_contents
// to out, and the latter's entries to flat in the tensor's layout.
func splitContents(out, flat, msg []byte) ([]byte, []byte) {
	for len(msg) > 0 {
		num, typ, val, n := consumeField(msg)
		if num == contentsBytes && typ == protowire.BytesType {
			flat = binary.LittleEndian.AppendUint32(flat, uint32(len(val)))
			flat = append(flat, val...)
		} else {
			out = append(out, msg[:n]...)
		}
		msg = msg[n:]
	}
	return out, flat
}
