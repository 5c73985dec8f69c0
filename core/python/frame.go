package python

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/inferd/inferd/core"
)

// A frame, both ways (inferd's own worker protocol): u64 little-endian length
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
	// Arena: the bytes are in the worker's shared arena at Off, not in
	// the frame (large tensors of execute and its reply).
	Arena bool `json:"arena,omitempty"`
	// ArenaIn, in an execute's reply only: the bytes are the execution's
	// own inputs in the arena's input half, at Off in its slot's part (a
	// model that returns a view of an input, as an identity does), which
	// the worker therefore did not copy.
	ArenaIn bool `json:"arena_in,omitempty"`
}

// arenaThreshold is the size from which a tensor of an execute, or of its
// reply, travels through the shared arena rather than the socket.
const arenaThreshold = 64 << 10

// frameOut is a frame being written: its header and the blobs its
// descriptors index, in order; the blobs are the tensors' own bytes.
type frameOut struct {
	blobs [][]byte
	size  int
	// arena, when set, is the worker's input half of its shared arena:
	// large tensors are copied there once and numpy reads them in place.
	arena     []byte
	arenaBase int // arena's offset in the input half (an execution slot's part)
	arenaUsed int
}

// add describes t, its bytes appended to the blob area or, when large and
// an arena has room, copied into the arena.
func (f *frameOut) add(t *core.Tensor) tensorDesc {
	d := tensorDesc{Name: t.Name, Datatype: t.DataType.String(), Shape: t.Shape, Len: len(t.Data)}
	if d.Shape == nil {
		d.Shape = []int64{}
	}
	if n := len(t.Data); f.arena != nil && n >= arenaThreshold && f.arenaUsed+n <= len(f.arena) {
		copy(f.arena[f.arenaUsed:], t.Data)
		d.Off, d.Arena = f.arenaBase+f.arenaUsed, true
		f.arenaUsed = (f.arenaUsed + n + 63) &^ 63
		return d
	}
	d.Off = f.size
	f.blobs = append(f.blobs, t.Data)
	f.size += len(t.Data)
	return d
}

// write sends header (which must carry "op") and the blobs as one frame,
// in a single vectored write where the connection allows it.
func (f *frameOut) write(w io.Writer, header any) error {
	_, err := f.writeCount(w, header)
	return err
}

// writeCount is write, saying how many bytes went out: none, after a
// failed write, leaves the stream whole.
func (f *frameOut) writeCount(w io.Writer, header any) (int64, error) {
	h, ok := header.(rawHeader)
	if !ok {
		var err error
		if h, err = json.Marshal(header); err != nil {
			return 0, fmt.Errorf("encode %T: %w", header, err)
		}
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
	return bufs.WriteTo(w)
}

// frameIn is a received frame: its header and blob area.
type frameIn struct {
	header []byte
	blobs  []byte
	arena  []byte // the worker's output half of the arena, if it has one
	// arenaIn, for an execute's reply, is that execution's part of the
	// arena's input half (its slot's), where ArenaIn tensors lie.
	arenaIn []byte
	// after, for an execute_done, is when the worker's previous execute
	// was answered: a pipelined execute only started running then.
	after time.Time
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
	buf, err := readN(r, int(n-4))
	if err != nil {
		return frameIn{}, err
	}
	return frameIn{header: buf[:h], blobs: buf[h:]}, nil
}

// readN reads n bytes. Up to 64 MiB are allocated at once; beyond that
// the buffer grows as the bytes arrive, so a frame that claims more than
// it carries costs no more memory than it sent.
func readN(r io.Reader, n int) ([]byte, error) {
	const eager = 64 << 20
	if n <= eager {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf := make([]byte, 0, eager)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(cap(buf), n-len(buf)))...)[:len(buf)]
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// tensor is the tensor d describes, its bytes shared with the frame.
// A tensor in the arena is copied out: the worker reuses that space for
// its next reply, and the server its input half for its next execute.
func (f frameIn) tensor(d tensorDesc) (*core.Tensor, error) { return f.tensorInto(d, nil) }

// tensorInto is tensor, but a tensor in the arena that fits dst (a
// caller's destination, core.ExecRequest.Into) is copied there, and its Data
// is then a prefix of dst: the frontend sees that and skips its own copy.
func (f frameIn) tensorInto(d tensorDesc, dst []byte) (*core.Tensor, error) {
	area := f.blobs
	switch {
	case d.Arena && d.ArenaIn:
		return nil, fmt.Errorf("tensor '%s' lies in both halves of the arena", d.Name)
	case d.Arena:
		area = f.arena
	case d.ArenaIn:
		area = f.arenaIn
	}
	if d.Off < 0 || d.Len < 0 || d.Off+d.Len > len(area) || d.Off+d.Len < d.Off {
		return nil, fmt.Errorf("tensor '%s' lies outside the frame (%d+%d of %d bytes)", d.Name, d.Off, d.Len, len(area))
	}
	dt := core.ParseDataType(d.Datatype)
	if dt == core.TypeInvalid {
		return nil, fmt.Errorf("tensor '%s' has unknown datatype '%s'", d.Name, d.Datatype)
	}
	data := area[d.Off : d.Off+d.Len : d.Off+d.Len]
	// n == len/size, not n*size == len: the product may wrap.
	if n, size := core.ElementCount(d.Shape), int64(dt.ByteSize()); dt != core.TypeBytes && (n < 0 || int64(len(data))%size != 0 || n != int64(len(data))/size) {
		return nil, fmt.Errorf("tensor '%s' of shape %s holds %d bytes", d.Name, core.ShapeString(d.Shape), len(data))
	}
	switch inArena := d.Arena || d.ArenaIn; {
	case inArena && len(data) > 0 && len(data) <= len(dst):
		data = dst[:copy(dst, data):len(data)]
	case inArena:
		data = append([]byte(nil), data...)
	}
	return &core.Tensor{Name: d.Name, DataType: dt, Shape: d.Shape, Data: data}, nil
}

// routing is what the reader needs of a frame's header: its op, and the
// seq its reply matches (0 when absent).
type routing struct {
	Op  string `json:"op"`
	Seq int64  `json:"seq"`
}

// route reads a header's op and seq. The worker writes them first,
// compactly ({"op":"execute_done","seq":12,...}), so they are read off the
// front without decoding the rest; any other header is decoded in full.
func route(h []byte) (routing, error) {
	const opKey, seqKey = `{"op":"`, `,"seq":`
	if rest, ok := bytes.CutPrefix(h, []byte(opKey)); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 && plainASCII(rest[:end]) {
			r := routing{Op: opName(rest[:end])}
			rest = rest[end+1:]
			if len(rest) > 0 && rest[0] == '}' {
				return r, nil
			}
			if num, ok := bytes.CutPrefix(rest, []byte(seqKey)); ok {
				n := 0
				for n < len(num) && num[n] >= '0' && num[n] <= '9' {
					n++
				}
				if n > 0 && n < len(num) && (num[n] == ',' || num[n] == '}') {
					if seq, err := strconv.ParseInt(string(num[:n]), 10, 64); err == nil {
						r.Seq = seq
						return r, nil
					}
				}
			}
		}
	}
	var r routing
	err := json.Unmarshal(h, &r)
	return r, err
}

// opName is op as a string, without an allocation for the frequent ones.
func opName(op []byte) string {
	switch string(op) {
	case "execute_done":
		return "execute_done"
	case "send":
		return "send"
	case "log":
		return "log"
	case "metric":
		return "metric"
	case "bls":
		return "bls"
	}
	return string(op)
}

// plainASCII: printable ASCII without escapes, the same raw as decoded.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}
