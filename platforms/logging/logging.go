// Package logging holds the server's log settings while it runs: Triton's
// --log-info, --log-warning, --log-error, --log-verbose and --log-format,
// which HTTP /v2/logging and gRPC LogSettings change at run time
// (triton-inference-server/server docs/protocol/extension_logging.md), and
// the slog handler that obeys
// them, writing Triton's line layouts. The command's logger and both
// frontends share one *Settings.
//
// It imports the core only for the request log (LogRequest reads the
// frontends' core.InferRequest); its error comes from the leaf
// core/status.
package logging

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/status"
)

// ErrFileFixed refuses a change of the log file over the network, as
// Triton does on both protocols. It is a status error (the core's
// core.Error is the same type).
var ErrFileFixed = status.Errorf(status.CodeUnsupported, "log file location can not be updated through network protocol")

// Switches are the logging API's on/off settings, in the order Triton
// applies them (the first error stops the rest).
var Switches = []struct {
	Key string
	Set func(*State, bool)
}{
	{"log_info", func(st *State, on bool) { st.Info = on }},
	{"log_warning", func(st *State, on bool) { st.Warning = on }},
	{"log_error", func(st *State, on bool) { st.Error = on }},
}

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
	// escape quotes the text layouts' messages as JSON strings, as
	// Triton does unless TRITON_SERVER_ESCAPE_LOG_MESSAGES is "0".
	escape atomic.Bool
}

// New returns settings starting at st; file is --log-file ("" for the
// console), reported by the APIs and never changed by them.
func New(file string, st State) *Settings {
	s := &Settings{file: file}
	s.word.Store(st.word())
	s.escape.Store(true)
	return s
}

// SetEscape chooses whether the default and ISO8601 layouts quote and
// escape each message (Triton's TRITON_SERVER_ESCAPE_LOG_MESSAGES; on
// unless that is "0"). Unescaped, a message's newlines split its line.
func (s *Settings) SetEscape(on bool) { s.escape.Store(on) }

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
// written (default and ISO8601: Triton's text lines, see textHandler;
// json: slog's JSON lines).
func (s *Settings) Handler(w io.Writer) slog.Handler {
	return s.handler(w, os.Getpid(), nil)
}

// handler is Handler with the pid and, when now is not nil, the clock
// chosen, so that tests can compare whole lines.
func (s *Settings) handler(w io.Writer, pid int, now func() time.Time) *handler {
	// The layouts share one writer; a lock keeps lines of two of them
	// from interleaving while the format changes.
	lw := &lockedWriter{w: w}
	all := &slog.HandlerOptions{Level: slog.Level(math.MinInt)}
	return &handler{s: s, text: &textHandler{s: s, w: lw, pid: pid, now: now},
		json: slog.NewJSONHandler(lw, all)}
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
	s    *Settings
	text *textHandler
	json slog.Handler
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return enabled(h.s.word.Load(), l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	switch stateOf(h.s.word.Load()).Format {
	case FormatJSON:
		return h.json.Handle(ctx, r)
	case FormatISO8601:
		return h.text.handle(r, true)
	}
	return h.text.handle(r, false)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{s: h.s, text: h.text.withAttrs(attrs), json: h.json.WithAttrs(attrs)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" { // slog's rule: an empty group name changes nothing
		return h
	}
	return &handler{s: h.s, text: h.text.withGroup(name), json: h.json.WithGroup(name)}
}

// LogHTTP writes Triton's verbose level 1 line for every HTTP request
// (server's http_server.cc), "HTTP request: <method> <path>", the method
// as libevhtp's number Triton prints (0 GET, 2 POST, ...). With verbose
// logging off (or nil settings) it costs one atomic load and allocates
// nothing.
func (s *Settings) LogHTTP(ctx context.Context, log *slog.Logger, method, path string) {
	if s != nil && s.Verbose() > 0 {
		logCaller(ctx, log, "HTTP request: "+strconv.Itoa(htpMethod(method))+" "+path)
	}
}

// LogRPC writes the verbose level 1 line Triton's gRPC frontend writes as
// it starts processing a call (server's grpc_server.cc and
// infer_handler.cc): "Process for <handler>, rpc_ok=1, <id> step START".
// handler is Triton's name for the call's handler (the RPC's name, or
// ModelInferHandler / ModelStreamInferHandler); id numbers the calls.
// With verbose logging off (or nil settings) it costs one atomic load and
// allocates nothing.
func (s *Settings) LogRPC(ctx context.Context, log *slog.Logger, handler string, id uint64) {
	if s != nil && s.Verbose() > 0 {
		logCaller(ctx, log, "Process for "+handler+", rpc_ok=1, "+strconv.FormatUint(id, 10)+" step START")
	}
}

// logCaller logs msg at Verbosity(1) as if from the caller of this
// package's exported function, so that the text layouts name the
// frontend's file and line, as Triton's name http_server.cc and
// infer_handler.cc, rather than this package's.
func logCaller(ctx context.Context, log *slog.Logger, msg string, attrs ...slog.Attr) {
	h := log.Handler()
	if !h.Enabled(ctx, Verbosity(1)) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // Callers, logCaller, the exported function
	r := slog.NewRecord(time.Now(), Verbosity(1), msg, pcs[0])
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r) // a log line that cannot be written has nowhere to go
}

// htpMethod is libevhtp's enum htp_method value of an HTTP method.
func htpMethod(m string) int {
	for i, n := range htpMethods {
		if m == n {
			return i
		}
	}
	return len(htpMethods) // htp_method_UNKNOWN
}

var htpMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "MKCOL", "COPY", "MOVE", "OPTIONS",
	"PROPFIND", "PROPPATCH", "LOCK", "UNLOCK", "TRACE", "CONNECT", "PATCH"}

// LogRequest logs one inference request as its frontend received it: at
// verbose level 1 the protocol, path (HTTP) or method (gRPC), model,
// version and id, and a sequence's correlation id and flags; at level 2 and up also each input's name, datatype and
// shape. With verbose logging off (or nil settings) it costs one atomic
// load and allocates nothing.
func (s *Settings) LogRequest(ctx context.Context, log *slog.Logger, protocol, path string, req *core.InferRequest) {
	if s != nil && s.Verbose() > 0 {
		logCaller(ctx, log, "inference request", s.requestAttrs(protocol, path, req)...)
	}
}

func (s *Settings) requestAttrs(protocol, path string, req *core.InferRequest) []slog.Attr {
	version := "latest"
	if req.ModelVersion >= 0 {
		version = strconv.FormatInt(req.ModelVersion, 10)
	}
	attrs := []slog.Attr{slog.String("protocol", protocol), slog.String("path", path),
		slog.String("model", req.ModelName), slog.String("version", version)}
	if req.ID != "" {
		attrs = append(attrs, slog.String("id", req.ID))
	}
	// A sequence's id and flags, as Triton's request dump shows them
	// (triton-inference-server/core src/infer_request.cc, operator<<).
	switch c := req.Correlation; {
	case c.IsString && c.StringID != "":
		attrs = append(attrs, slog.String("correlation_id", c.StringID))
	case !c.IsString && c.ID != 0:
		attrs = append(attrs, slog.Uint64("correlation_id", c.ID))
	}
	if f := req.Correlation.Flags; f != 0 {
		attrs = append(attrs, slog.Uint64("flags", uint64(f)))
	}
	if s.Verbose() >= 2 {
		attrs = append(attrs, slog.String("inputs", describeInputs(req.Inputs)))
	}
	return attrs
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
