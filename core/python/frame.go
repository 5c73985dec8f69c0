package python

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"

	"github.com/inferd/inferd/core"
)

// A frame, both ways (python-backend.md §8.3): u64 little-endian length
// of the rest, u32 header length, the JSON header (always with "op"), then
// the blob area the header's tensor descriptors index.

// maxFrame bounds a frame a worker may send: far above any tensor a
// request can carry, low enough that a corrupt length fails at once.
const maxFrame = 1 << 36

// tensorDesc describes one tensor whose bytes are in the blob area.
type tensorDesc struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	Off      int     `json:"off"`
	Len      int     `json:"len"`
}

// frameOut is a frame being written: its header and the blobs its
// descriptors index, in order; the blobs are the tensors' own bytes.
type frameOut struct {
	blobs [][]byte
	size  int
}

// add appends t's bytes to the blob area and describes it.
func (f *frameOut) add(t *core.Tensor) tensorDesc {
	d := tensorDesc{Name: t.Name, Datatype: t.DataType.String(), Shape: t.Shape, Off: f.size, Len: len(t.Data)}
	if d.Shape == nil {
		d.Shape = []int64{}
	}
	f.blobs = append(f.blobs, t.Data)
	f.size += len(t.Data)
	return d
}

// write sends header (which must carry "op") and the blobs as one frame,
// in a single vectored write where the connection allows it.
func (f *frameOut) write(w io.Writer, header any) error {
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode %T: %w", header, err)
	}
	prefix := make([]byte, 12, 12+len(h))
	binary.LittleEndian.PutUint64(prefix, uint64(4+len(h)+f.size))
	binary.LittleEndian.PutUint32(prefix[8:], uint32(len(h)))
	bufs := net.Buffers{append(prefix, h...)}
	for _, b := range f.blobs {
		if len(b) > 0 {
			bufs = append(bufs, b)
		}
	}
	_, err = bufs.WriteTo(w)
	return err
}

// frameIn is a received frame: its header and blob area.
type frameIn struct {
	header []byte
	blobs  []byte
}

// readFrame reads one frame.
func readFrame(r *bufio.Reader) (frameIn, error) {
	var head [12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return frameIn{}, err
	}
	n := binary.LittleEndian.Uint64(head[:8])
	h := uint64(binary.LittleEndian.Uint32(head[8:]))
	if n < 4 || n > maxFrame || h > n-4 {
		return frameIn{}, fmt.Errorf("malformed frame: length %d, header %d", n, h)
	}
	buf := make([]byte, n-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return frameIn{}, err
	}
	return frameIn{header: buf[:h], blobs: buf[h:]}, nil
}

// tensor is the tensor d describes, its bytes shared with the frame.
func (f frameIn) tensor(d tensorDesc) (*core.Tensor, error) {
	if d.Off < 0 || d.Len < 0 || d.Off+d.Len > len(f.blobs) || d.Off+d.Len < d.Off {
		return nil, fmt.Errorf("tensor '%s' lies outside the frame (%d+%d of %d bytes)", d.Name, d.Off, d.Len, len(f.blobs))
	}
	dt := core.ParseDataType(d.Datatype)
	if dt == core.TypeInvalid {
		return nil, fmt.Errorf("tensor '%s' has unknown datatype '%s'", d.Name, d.Datatype)
	}
	data := f.blobs[d.Off : d.Off+d.Len : d.Off+d.Len]
	if n := core.ElementCount(d.Shape); dt != core.TypeBytes && (n < 0 || n*int64(dt.ByteSize()) != int64(len(data))) {
		return nil, fmt.Errorf("tensor '%s' of shape %s holds %d bytes", d.Name, core.ShapeString(d.Shape), len(data))
	}
	return &core.Tensor{Name: d.Name, DataType: dt, Shape: d.Shape, Data: data}, nil
}
