package trace

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/inferd/inferd/core"
)

// fileSink is one trace file: a JSON array of records, opened (and
// truncated) at its first write and closed with "]" when the server
// stops, plus the indexed files <name>.0, <name>.1, ... that a log
// frequency or a spent count writes whole, as Triton's TraceFile.
type fileSink struct {
	name string
	log  *slog.Logger

	mu      sync.Mutex
	f       *os.File
	index   int
	closed  bool   // the server stopped: the file is complete
	dropped uint64 // saves refused after close
}

// save writes traces (records, comma separated): to the next indexed file
// as a complete array, or appended to the trace file's array. After close
// (a trace that finished after the server stopped) it drops them: creating
// the trace file again would truncate the completed array.
func (s *fileSink) save(traces []byte, indexed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.dropped++
		s.log.Debug("dropping a trace finished after the trace file was closed", "file", s.name, "dropped", s.dropped)
		return
	}
	if indexed {
		name := s.name + "." + strconv.Itoa(s.index)
		s.index++
		body := make([]byte, 0, len(traces)+2)
		body = append(append(append(body, '['), traces...), ']')
		if err := os.WriteFile(name, body, 0o644); err != nil {
			s.log.Error("failed creating trace file", "file", name, "err", err)
		}
		return
	}
	sep := byte(',')
	if s.f == nil {
		f, err := os.Create(s.name)
		if err != nil {
			s.log.Error("failed creating trace file", "file", s.name, "err", err)
			return
		}
		s.f, sep = f, '['
	}
	if _, err := s.f.Write(append([]byte{sep}, traces...)); err != nil {
		s.log.Error("failed writing trace file", "file", s.name, "err", err)
	}
}

// droppedCount is how many saves came after close.
func (s *fileSink) droppedCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// close ends the trace file's array, if it was started; later saves are
// dropped.
func (s *fileSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.f == nil {
		return nil
	}
	_, err := s.f.Write([]byte{']'})
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	if err != nil {
		return fmt.Errorf("closing trace file %s: %w", s.name, err)
	}
	return nil
}

// tensorData prints a tensor's elements as Triton's TENSORS records do:
// comma separated, BOOL as 1 or 0, floats with six significant digits
// (C++ stream defaults), BYTES elements in escaped quotes; FP16 and BF16
// print nothing. Integers of one byte print as numbers (Triton streams
// them as characters).
func tensorData(t *core.Tensor) string {
	var b strings.Builder
	d := t.Data
	le := binary.LittleEndian
	n := int(core.ElementCount(t.Shape))
	if len(t.Shape) == 0 {
		n = 1 // a scalar: C++'s product over no dims
	}
	size := t.DataType.ByteSize()
	if t.DataType == core.TypeFP16 || t.DataType == core.TypeBF16 {
		return ""
	}
	for i := 0; i < n; i++ {
		var s string
		if t.DataType == core.TypeBytes {
			if len(d) < 4 || uint64(len(d)-4) < uint64(le.Uint32(d)) {
				break
			}
			l := le.Uint32(d)
			s = `"` + string(d[4:4+l]) + `"`
			d = d[4+l:]
		} else {
			if size <= 0 || (i+1)*size > len(d) {
				break
			}
			e := d[i*size : (i+1)*size]
			switch t.DataType {
			case core.TypeBool:
				s = "0"
				if e[0] != 0 {
					s = "1"
				}
			case core.TypeUint8:
				s = strconv.FormatUint(uint64(e[0]), 10)
			case core.TypeInt8:
				s = strconv.FormatInt(int64(int8(e[0])), 10)
			case core.TypeUint16:
				s = strconv.FormatUint(uint64(le.Uint16(e)), 10)
			case core.TypeInt16:
				s = strconv.FormatInt(int64(int16(le.Uint16(e))), 10)
			case core.TypeUint32:
				s = strconv.FormatUint(uint64(le.Uint32(e)), 10)
			case core.TypeInt32:
				s = strconv.FormatInt(int64(int32(le.Uint32(e))), 10)
			case core.TypeUint64:
				s = strconv.FormatUint(le.Uint64(e), 10)
			case core.TypeInt64:
				s = strconv.FormatInt(int64(le.Uint64(e)), 10)
			case core.TypeFP32:
				s = strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(e))), 'g', 6, 32)
			case core.TypeFP64:
				s = strconv.FormatFloat(math.Float64frombits(le.Uint64(e)), 'g', 6, 64)
			}
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}
