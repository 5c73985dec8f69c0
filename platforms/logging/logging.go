// Package logging holds the server's log settings while it runs: Triton's
// --log-info, --log-warning, --log-error, --log-verbose and --log-format,
// which HTTP /v2/logging and gRPC LogSettings change at run time
// (http-api.md §8.2, grpc-api.md §9.2), and the slog handler that obeys
// them. The command's logger and both frontends share one *Settings.
package logging

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/inferd/inferd/core"
)

// Format is the layout of a log line.
type Format uint8

// Formats. FormatDefault and FormatISO8601 are Triton's names; FormatJSON
// is inferd's structured lines, chosen with --log-format=json only (the
// network APIs accept Triton's two, as Triton does).
const (
	FormatDefault Format = iota
	FormatISO8601
	FormatJSON
)

var formatNames = [...]string{FormatDefault: "default", FormatISO8601: "ISO8601", FormatJSON: "json"}

// String is the format's option value.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "default"
}

// ParseFormat reads an option value: "default", "ISO8601" or "json",
// exactly (Triton compares case-sensitively).
func ParseFormat(s string) (Format, bool) {
	for i, n := range formatNames {
		if s == n {
			return Format(i), true
		}
	}
	return FormatDefault, false
}

// State is one consistent view of the settings.
type State struct {
	Info, Warning, Error bool
	// Verbose is Triton's verbose level: 0 is off; level n shows the
	// lines logged at Verbosity(n) and below.
	Verbose uint32
	Format  Format
}

// The state lives in one word so that a reader never sees half an update
// and the hot path is one atomic load: bits 0-31 the verbose level, then
// one bit per switch, then two bits of format.
const (
	infoBit    = 1 << 32
	warningBit = 1 << 33
	errorBit   = 1 << 34
	formatBits = 35
)

func (st State) word() uint64 {
	w := uint64(st.Verbose) | uint64(st.Format&3)<<formatBits
	if st.Info {
		w |= infoBit
	}
	if st.Warning {
		w |= warningBit
	}
	if st.Error {
		w |= errorBit
	}
	return w
}

func stateOf(w uint64) State {
	return State{Verbose: uint32(w), Info: w&infoBit != 0, Warning: w&warningBit != 0, Error: w&errorBit != 0,
		Format: Format(w >> formatBits & 3)}
}

// Settings are the live log settings, safe for concurrent use.
type Settings struct {
	word atomic.Uint64
	file string
}

// New returns settings starting at st; file is --log-file ("" for the
// console), reported by the APIs and never changed by them.
func New(file string, st State) *Settings {
	s := &Settings{file: file}
	s.word.Store(st.word())
	return s
}

// Default is Triton's start-up state: info, warning and error on, verbose
// off, default format.
func Default() State { return State{Info: true, Warning: true, Error: true} }

// File is --log-file.
func (s *Settings) File() string { return s.file }

// Load returns the current state.
func (s *Settings) Load() State { return stateOf(s.word.Load()) }

// Update applies change to the current state atomically: concurrent
// updates of different fields never undo each other.
func (s *Settings) Update(change func(*State)) {
	for {
		old := s.word.Load()
		st := stateOf(old)
		change(&st)
		if s.word.CompareAndSwap(old, st.word()) {
			return
		}
	}
}

// Verbose is the verbose level (0: off); one atomic load, for the request
// path.
func (s *Settings) Verbose() uint32 { return uint32(s.word.Load()) }

// Verbosity is the slog level of Triton's verbose level n ≥ 1: level 1 is
// slog.LevelDebug, and each higher level one below it, so a line logged at
// Verbosity(n) shows when the verbose level is n or more.
func Verbosity(n uint32) slog.Level {
	return slog.LevelDebug + 1 - slog.Level(n)
}

// enabled reports whether a line of level l shows under the state w.
func enabled(w uint64, l slog.Level) bool {
	switch {
	case l >= slog.LevelError:
		return w&errorBit != 0
	case l >= slog.LevelWarn:
		return w&warningBit != 0
	case l >= slog.LevelInfo:
		return w&infoBit != 0
	}
	need := uint32(1)
	if l < slog.LevelDebug {
		need = uint32(slog.LevelDebug-l) + 1
	}
	return uint32(w) >= need
}

// Handler returns a handler writing to w that obeys s: the switches and
// the verbose level decide which lines show, and the format how each is
// written (default: slog's text lines; ISO8601: the same with the time
// as Triton's UTC "2006-01-02T15:04:05Z"; json: slog's JSON lines).
func (s *Settings) Handler(w io.Writer) slog.Handler {
	// The three layouts share one writer; a lock keeps lines of two of
	// them from interleaving while the format changes.
	lw := &lockedWriter{w: w}
	all := &slog.HandlerOptions{Level: slog.Level(math.MinInt)}
	iso := &slog.HandlerOptions{Level: all.Level, ReplaceAttr: isoTime}
	return &handler{s: s, by: [3]slog.Handler{
		FormatDefault: slog.NewTextHandler(lw, all),
		FormatISO8601: slog.NewTextHandler(lw, iso),
		FormatJSON:    slog.NewJSONHandler(lw, all),
	}}
}

func isoTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Value = slog.StringValue(a.Value.Time().UTC().Format("2006-01-02T15:04:05Z"))
	}
	return a
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type handler struct {
	s  *Settings
	by [3]slog.Handler // by Format
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return enabled(h.s.word.Load(), l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.by[stateOf(h.s.word.Load()).Format%3].Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &handler{s: h.s}
	for i, b := range h.by {
		n.by[i] = b.WithAttrs(attrs)
	}
	return n
}

func (h *handler) WithGroup(name string) slog.Handler {
	n := &handler{s: h.s}
	for i, b := range h.by {
		n.by[i] = b.WithGroup(name)
	}
	return n
}

// LogRequest logs one inference request as its frontend received it: at
// verbose level 1 the protocol, path (HTTP) or method (gRPC), model,
// version and id; at level 2 and up also each input's name, datatype and
// shape. With verbose logging off (or nil settings) it costs one atomic
// load and allocates nothing.
func (s *Settings) LogRequest(ctx context.Context, log *slog.Logger, protocol, path string, req *core.InferRequest) {
	if s != nil && s.Verbose() > 0 {
		s.logRequest(ctx, log, protocol, path, req)
	}
}

func (s *Settings) logRequest(ctx context.Context, log *slog.Logger, protocol, path string, req *core.InferRequest) {
	version := "latest"
	if req.ModelVersion >= 0 {
		version = strconv.FormatInt(req.ModelVersion, 10)
	}
	attrs := []slog.Attr{slog.String("protocol", protocol), slog.String("path", path),
		slog.String("model", req.ModelName), slog.String("version", version)}
	if req.ID != "" {
		attrs = append(attrs, slog.String("id", req.ID))
	}
	if s.Verbose() >= 2 {
		attrs = append(attrs, slog.String("inputs", describeInputs(req.Inputs)))
	}
	log.LogAttrs(ctx, Verbosity(1), "inference request", attrs...)
}

// describeInputs is "NAME DATATYPE [d0,d1], ..." in request order.
func describeInputs(ts []*core.Tensor) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Name)
		b.WriteByte(' ')
		b.WriteString(t.DataType.String())
		b.WriteString(" [")
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		b.WriteByte(']')
	}
	return b.String()
}
