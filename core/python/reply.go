package python

import (
	"strconv"
	"unicode/utf8"
)

// executeDone is the worker's answer to an execute: one entry per request
// (nil: none given), or an error for the whole batch.
type executeDone struct {
	Error     string          `json:"error"`
	Responses []*wireResponse `json:"responses"`
	// Reschedule lists the requests (by index) the model released with
	// TRITONSERVER_REQUEST_RELEASE_RESCHEDULE; rare, so read by the
	// fallback decoder.
	Reschedule []int `json:"reschedule"`
}

// decodeExecuteDone decodes an execute_done header. Decoding it with
// encoding/json took about a sixth of the server's CPU for a small Python
// request, so the common form (compact, plain strings, known keys, integer
// numbers: what the worker writes) is read by hand, and anything else by
// encoding/json, which gives the same result (FuzzExecuteDone).
func decodeExecuteDone(f frameIn, d *executeDone) error {
	p := doneParser{b: f.header}
	if p.done(d) && p.i == len(p.b) {
		return nil
	}
	*d = executeDone{}
	return decode(f, d)
}

// doneParser reads the fast form; each method reports false as soon as
// the input leaves it, and the caller falls back.
type doneParser struct {
	b []byte
	i int
}

func (p *doneParser) next(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *doneParser) peek(c byte) bool { return p.i < len(p.b) && p.b[p.i] == c }

func (p *doneParser) null() bool {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// str reads a string without escapes or control bytes, valid UTF-8.
func (p *doneParser) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if k, ok := interned(s); ok {
				return k, true
			}
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// interned is b as a string kept in internedStrings when it is one of an
// answer's keys or frequent values, so that reading those allocates
// nothing (indexing a map by string(b) does not copy b).
func interned(b []byte) (string, bool) {
	s, ok := internedStrings[string(b)]
	return s, ok
}

// internedStrings never changes after it is made.
var internedStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"op", "seq", "error", "responses", "outputs", "parameters", "name", "datatype", "shape",
		"off", "len", "arena", "arena_in", "code", "message", "execute_done", "{}",
		"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"} {
		m[s] = s
	}
	return m
}()

// int reads an integer that fits 64 bits; no fraction, exponent or
// leading zero.
func (p *doneParser) int() (int64, bool) {
	start := p.i
	if p.peek('-') {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

// object reads {"key":value,...}, handing each key to field, which reads
// the value.
func (p *doneParser) object(field func(key string) bool) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	for {
		key, ok := p.str()
		if !ok || !p.next(':') || !field(key) {
			return false
		}
		if p.next('}') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

// array reads [v,...], element reading each value; null is no array.
func (p *doneParser) array(element func() bool) (isNull, ok bool) {
	if p.null() {
		return true, true
	}
	if !p.next('[') {
		return false, false
	}
	if p.next(']') {
		return false, true
	}
	for {
		if !element() {
			return false, false
		}
		if p.next(']') {
			return false, true
		}
		if !p.next(',') {
			return false, false
		}
	}
}

func (p *doneParser) done(d *executeDone) bool {
	return p.object(func(key string) bool {
		switch key {
		case "op":
			_, ok := p.str()
			return ok
		case "seq":
			_, ok := p.int()
			return ok
		case "error":
			var ok bool
			d.Error, ok = p.str()
			return ok
		case "responses":
			d.Responses = []*wireResponse{}
			isNull, ok := p.array(func() bool {
				if p.null() {
					d.Responses = append(d.Responses, nil)
					return true
				}
				r := &wireResponse{}
				d.Responses = append(d.Responses, r)
				return p.response(r)
			})
			if isNull {
				d.Responses = nil
			}
			return ok
		}
		return false
	})
}

func (p *doneParser) response(r *wireResponse) bool {
	return p.object(func(key string) bool {
		switch key {
		case "parameters":
			if p.null() {
				return true
			}
			var ok bool
			r.Parameters, ok = p.str()
			return ok
		case "outputs":
			r.Outputs = []tensorDesc{}
			isNull, ok := p.array(func() bool {
				r.Outputs = append(r.Outputs, tensorDesc{})
				return p.desc(&r.Outputs[len(r.Outputs)-1])
			})
			if isNull {
				r.Outputs = nil
			}
			return ok
		case "error":
			if p.null() {
				r.Error = nil
				return true
			}
			if r.Error == nil {
				r.Error = &wireError{}
			}
			return p.object(func(key string) bool {
				switch key {
				case "code":
					n, ok := p.int()
					r.Error.Code = int(n)
					return ok && int64(int(n)) == n
				case "message":
					var ok bool
					r.Error.Message, ok = p.str()
					return ok
				}
				return false
			})
		}
		return false
	})
}

func (p *doneParser) desc(d *tensorDesc) bool {
	return p.object(func(key string) bool {
		var ok bool
		switch key {
		case "name":
			d.Name, ok = p.str()
		case "datatype":
			d.Datatype, ok = p.str()
		case "shape":
			d.Shape = []int64{}
			var isNull bool
			isNull, ok = p.array(func() bool {
				n, ok := p.int()
				d.Shape = append(d.Shape, n)
				return ok
			})
			if isNull {
				d.Shape = nil
			}
		case "off", "len":
			var n int64
			n, ok = p.int()
			if key == "off" {
				d.Off = int(n)
			} else {
				d.Len = int(n)
			}
			ok = ok && int64(int(n)) == n
		case "arena":
			d.Arena, ok = p.bool()
		case "arena_in":
			d.ArenaIn, ok = p.bool()
		}
		return ok
	})
}

// bool reads true or false.
func (p *doneParser) bool() (v, ok bool) {
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// rawHeader is a header already encoded as JSON.
type rawHeader []byte

// appendExecute encodes an execute header as encoding/json would encode
// the same map (FuzzAppendExecute), without its reflection: about a
// sixteenth of the server's CPU for a small request.
func appendExecute(b []byte, seq int64, slot, verbose int, reqs []wireRequest) []byte {
	b = append(b, `{"op":"execute","seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"slot":`...)
	b = strconv.AppendInt(b, int64(slot), 10)
	b = append(b, `,"verbose":`...)
	b = strconv.AppendInt(b, int64(verbose), 10)
	b = append(b, `,"requests":[`...)
	for i, r := range reqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rid":`...)
		b = strconv.AppendInt(b, r.RID, 10)
		b = append(b, `,"id":`...)
		b = appendString(b, r.ID)
		b = append(b, `,"correlation_id":`...)
		switch c := r.CorrelationID.(type) {
		case string:
			b = appendString(b, c)
		case uint64:
			b = strconv.AppendUint(b, c, 10)
		default:
			b = append(b, '0')
		}
		b = append(b, `,"flags":`...)
		b = strconv.AppendUint(b, uint64(r.Flags), 10)
		b = append(b, `,"timeout_us":`...)
		b = strconv.AppendUint(b, r.TimeoutUs, 10)
		b = append(b, `,"parameters":`...)
		b = appendString(b, r.Parameters)
		b = append(b, `,"requested_outputs":[`...)
		for k, name := range r.Requested {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
		}
		b = append(b, `],"inputs":[`...)
		for k, d := range r.Inputs {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendDesc(b, d)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendDesc(b []byte, d tensorDesc) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, d.Name)
	b = append(b, `,"datatype":`...)
	b = appendString(b, d.Datatype)
	b = append(b, `,"shape":[`...)
	for i, n := range d.Shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	b = append(b, `],"off":`...)
	b = strconv.AppendInt(b, int64(d.Off), 10)
	b = append(b, `,"len":`...)
	b = strconv.AppendInt(b, int64(d.Len), 10)
	if d.Arena {
		b = append(b, `,"arena":true`...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, as encoding/json writes it for
// any reader: invalid UTF-8 becomes U+FFFD, control bytes are escaped (so
// are <, > and &, and U+2028/U+2029, as encoding/json does).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
