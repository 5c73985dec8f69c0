package logging

import (
	"log/slog"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/inferd/inferd/platforms/tritonjson"
)

// textHandler writes Triton's two text layouts (common's logging.cc):
//
//	default: I1124 09:05:03.123456 4242 main.go:117] "message" key=value
//	ISO8601: 2026-11-24T09:05:03Z I 4242 main.go:117] "message" key=value
//
// The level letter is E, W or I (Triton prints verbose lines as I), the
// time is UTC in both layouts, and the message is quoted and escaped as a
// JSON string unless TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 turned that off.
// Triton's lines carry no attributes; inferd appends the record's as
// key=value pairs after the message so that nothing slog callers pass is
// lost.
type textHandler struct {
	s   *Settings
	w   *lockedWriter
	pid int
	// now replaces the record's time when set: tests pin the clock.
	now    func() time.Time
	attrs  []byte // the WithAttrs pairs, rendered with their groups
	prefix string // the open groups, "a.b.", for later keys
}

// bufPool holds line buffers, so that writing a line does not allocate
// one each time.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func (h *textHandler) handle(r slog.Record, iso bool) error {
	bp := bufPool.Get().(*[]byte)
	b := h.appendLine((*bp)[:0], r, iso)
	_, err := h.w.Write(b)
	if cap(b) <= 64<<10 { // a huge line's buffer is not worth keeping
		*bp = b
		bufPool.Put(bp)
	}
	return err
}

func (h *textHandler) appendLine(b []byte, r slog.Record, iso bool) []byte {
	t := r.Time
	if h.now != nil {
		t = h.now()
	} else if t.IsZero() {
		t = time.Now()
	}
	t = t.UTC()
	letter := levelLetter(r.Level)
	if iso {
		b = t.AppendFormat(b, "2006-01-02T15:04:05Z")
		b = append(b, ' ', letter, ' ')
	} else {
		b = append(b, letter)
		b = t.AppendFormat(b, "0102 15:04:05.000000")
		b = append(b, ' ')
	}
	b = strconv.AppendInt(b, int64(h.pid), 10)
	b = append(b, ' ')

	// A Python model's Logger line names its model.py position in a
	// "file" attribute (core/python); Triton's Python backend prints that
	// position in place of its own source's, so do the same.
	src := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "file" && a.Value.Kind() == slog.KindString && isFileLine(a.Value.String()) {
			src = a.Value.String()
			return false
		}
		return true
	})
	if src != "" {
		b = append(b, path.Base(src)...)
	} else {
		b = appendSource(b, r.PC)
	}
	b = append(b, "] "...)

	if h.s.escape.Load() {
		b = tritonjson.AppendString(b, r.Message) // rapidjson's escaping, as Triton's TritonJson::SerializeString
	} else {
		b = append(b, r.Message...)
	}
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		if src != "" && a.Key == "file" && a.Value.Kind() == slog.KindString && a.Value.String() == src {
			src = "" // printed as the position already; a second "file" still prints
			return true
		}
		b = appendAttr(b, h.prefix, a)
		return true
	})
	return append(b, '\n')
}

// levelLetter is Triton's level name: verbose lines are I, as Triton's
// LOG_VERBOSE writes at its info level.
func levelLetter(l slog.Level) byte {
	switch {
	case l >= slog.LevelError:
		return 'E'
	case l >= slog.LevelWarn:
		return 'W'
	}
	return 'I'
}

// appendSource is the base name and line of the code that logged, from
// the record's PC (Triton prints its __FILE__ base name and __LINE__).
func appendSource(b []byte, pc uintptr) []byte {
	if pc == 0 {
		return append(b, "unknown:0"...)
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	if f.File == "" {
		return append(b, "unknown:0"...)
	}
	b = append(b, path.Base(f.File)...)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(f.Line), 10)
}

// isFileLine reports whether s looks like "name:line".
func isFileLine(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return false
	}
	for _, c := range s[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// appendAttr writes " key=value" for a, its groups' names joined to the
// key with dots, as slog's text handler does; it follows slog's rules of
// ignoring empty attributes and inlining groups without a key.
func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		if len(attrs) == 0 {
			return b
		}
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range attrs {
			b = appendAttr(b, prefix, g)
		}
		return b
	}
	b = append(b, ' ')
	b = appendValue(b, prefix+a.Key)
	b = append(b, '=')
	if a.Value.Kind() == slog.KindTime { // Value.String's layout has spaces
		return appendValue(b, a.Value.Time().Format(time.RFC3339Nano))
	}
	return appendValue(b, a.Value.String())
}

// appendValue writes s bare when it can be read back unambiguously
// (no space, quote, '=' or control character, not empty), else quoted
// with Go's escapes, as slog's text handler does.
func appendValue(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

func (h *textHandler) withAttrs(attrs []slog.Attr) *textHandler {
	n := *h
	n.attrs = append([]byte(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return &n
}

func (h *textHandler) withGroup(name string) *textHandler {
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}
