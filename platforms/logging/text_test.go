package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixedClock is 07:05:03.000012 in a zone an hour east of UTC: the lines
// must show it as UTC, as Triton's gmtime_r does.
func fixedClock() time.Time {
	return time.Date(2026, 3, 9, 7, 5, 3, 12345, time.FixedZone("east", 3600))
}

// here is the PC of its caller's call and that call's "file:line", for
// records that claim to come from this test.
func here() (uintptr, string) {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])
	_, file, line, _ := runtime.Caller(1)
	return pcs[0], file[strings.LastIndexByte(file, '/')+1:] + ":" + strconv.Itoa(line)
}

// lineOf is the line of a "file:line".
func lineOf(src string) int {
	n, _ := strconv.Atoi(src[strings.LastIndexByte(src, ':')+1:])
	return n
}

// The exact text layouts, against golden lines: the level letter, the
// UTC time, the pid, the source, the message quoted and escaped as
// Triton's TritonJson::SerializeString does, and slog's attributes after
// it. SRC in a golden line stands for the record's file:line.
func TestTextLayouts(t *testing.T) {
	pc, src := here()
	for _, tt := range []struct {
		name    string
		level   slog.Level
		msg     string
		attrs   []slog.Attr
		noPC    bool
		raw     bool // TRITON_SERVER_ESCAPE_LOG_MESSAGES=0
		def     string
		iso     string
		derived func(*slog.Logger) *slog.Logger // With / WithGroup before the line
	}{
		{name: "info", level: slog.LevelInfo, msg: "hello",
			def: `I0309 06:05:03.000012 4242 SRC] "hello"`, iso: `2026-03-09T06:05:03Z I 4242 SRC] "hello"`},
		{name: "warning", level: slog.LevelWarn, msg: "careful",
			def: `W0309 06:05:03.000012 4242 SRC] "careful"`, iso: `2026-03-09T06:05:03Z W 4242 SRC] "careful"`},
		{name: "error", level: slog.LevelError, msg: "failed",
			def: `E0309 06:05:03.000012 4242 SRC] "failed"`, iso: `2026-03-09T06:05:03Z E 4242 SRC] "failed"`},
		{name: "verbose lines are I, as in Triton", level: Verbosity(3), msg: "detail",
			def: `I0309 06:05:03.000012 4242 SRC] "detail"`, iso: `2026-03-09T06:05:03Z I 4242 SRC] "detail"`},
		{name: "escapes", level: slog.LevelInfo, msg: "a \"q\" \\ \n\t\r\b\f\x01\x1f é \x7f",
			def: `I0309 06:05:03.000012 4242 SRC] "a \"q\" \\ \n\t\r\b\f\u0001\u001F é ` + "\x7f" + `"`},
		{name: "NUL does not end the message", level: slog.LevelInfo, msg: "a\x00b",
			def: `I0309 06:05:03.000012 4242 SRC] "a\u0000b"`},
		{name: "escaping off", level: slog.LevelInfo, msg: `say "hi"`, raw: true,
			def: `I0309 06:05:03.000012 4242 SRC] say "hi"`, iso: `2026-03-09T06:05:03Z I 4242 SRC] say "hi"`},
		{name: "attributes after the message", level: slog.LevelError, msg: "load failed",
			attrs: []slog.Attr{slog.String("model", "simple"), slog.Int64("version", 3), slog.Any("err", errors.New("no such file")),
				slog.String("empty", ""), slog.String("eq", "a=b"), slog.Bool("ok", false), slog.Duration("took", 1500*time.Millisecond)},
			def: `E0309 06:05:03.000012 4242 SRC] "load failed" model=simple version=3 err="no such file" empty="" eq="a=b" ok=false took=1.5s`},
		{name: "groups", level: slog.LevelInfo, msg: "m",
			attrs: []slog.Attr{slog.Group("g", slog.String("a", "1"), slog.Group("h", slog.Int("b", 2))), slog.Group("", slog.String("inline", "x")),
				slog.Group("none"), {}},
			def: `I0309 06:05:03.000012 4242 SRC] "m" g.a=1 g.h.b=2 inline=x`},
		{name: "With and WithGroup", level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.String("k", "v")},
			derived: func(l *slog.Logger) *slog.Logger {
				return l.With("model", "simple").WithGroup("").WithGroup("g").With("w", 1)
			},
			def: `I0309 06:05:03.000012 4242 SRC] "m" model=simple g.w=1 g.k=v`},
		{name: "a Python model's position replaces the source", level: slog.LevelWarn, msg: "from python",
			attrs: []slog.Attr{slog.String("file", "/models/m/1/model.py:7")},
			def:   `W0309 06:05:03.000012 4242 model.py:7] "from python"`, iso: `2026-03-09T06:05:03Z W 4242 model.py:7] "from python"`},
		{name: "a file that is no position stays an attribute", level: slog.LevelInfo, msg: "loaded",
			attrs: []slog.Attr{slog.String("file", "/models/m/1/model.onnx")},
			def:   `I0309 06:05:03.000012 4242 SRC] "loaded" file=/models/m/1/model.onnx`},
		{name: "no PC", level: slog.LevelInfo, msg: "hello", noPC: true,
			def: `I0309 06:05:03.000012 4242 unknown:0] "hello"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []Format{FormatDefault, FormatISO8601} {
				want := tt.def
				if format == FormatISO8601 {
					if tt.iso == "" {
						continue
					}
					want = tt.iso
				}
				var buf bytes.Buffer
				s := New("", State{Info: true, Warning: true, Error: true, Verbose: 5, Format: format})
				s.SetEscape(!tt.raw)
				h := slog.Handler(s.handler(&buf, 4242, fixedClock))
				if tt.derived != nil {
					h = tt.derived(slog.New(h)).Handler()
				}
				r := slog.NewRecord(time.Now(), tt.level, tt.msg, pc)
				if tt.noPC {
					r.PC = 0
				}
				r.AddAttrs(tt.attrs...)
				if err := h.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if want = strings.ReplaceAll(want, "SRC", src) + "\n"; buf.String() != want {
					t.Errorf("%s:\n got %q\nwant %q", format, buf.String(), want)
				}
			}
		})
	}
}

// Without an injected clock the line carries the record's time, in UTC.
func TestTextUsesRecordTime(t *testing.T) {
	var buf bytes.Buffer
	s := New("", Default())
	r := slog.NewRecord(fixedClock(), slog.LevelInfo, "m", 0)
	if err := s.Handler(&buf).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "I0309 06:05:03.000012 ") {
		t.Fatalf("line %q", buf.String())
	}
}

// A line logged through a Logger names the line that called it.
func TestTextSourceIsTheCaller(t *testing.T) {
	var buf bytes.Buffer
	s := New("", Default())
	log := slog.New(s.handler(&buf, 1, fixedClock))
	_, src := here()
	log.Info("m") // the line after here's
	want := "text_test.go:" + strconv.Itoa(lineOf(src)+1)
	if got := buf.String(); got != `I0309 06:05:03.000012 1 `+want+`] "m"`+"\n" {
		t.Fatalf("line %q, want source %s", got, want)
	}
}

// Triton's verbose HTTP line, with libevhtp's method number, names the
// caller's file (the frontend's middleware), not this package's.
func TestLogHTTP(t *testing.T) {
	for _, tt := range []struct {
		verbose      uint32
		method, want string
	}{
		{0, "GET", ""},
		{1, "GET", `"HTTP request: 0 /v2/health/ready"`},
		{1, "POST", `"HTTP request: 2 /v2/health/ready"`},
		{2, "PATCH", `"HTTP request: 15 /v2/health/ready"`},
		{1, "BREW", `"HTTP request: 16 /v2/health/ready"`},
	} {
		var buf bytes.Buffer
		s := New("", State{Verbose: tt.verbose})
		_, src := here()
		s.LogHTTP(context.Background(), slog.New(s.handler(&buf, 7, fixedClock)), tt.method, "/v2/health/ready")
		if tt.want == "" {
			if buf.Len() != 0 {
				t.Errorf("verbose 0 logged %q", buf.String())
			}
			continue
		}
		want := "I0309 06:05:03.000012 7 text_test.go:" + strconv.Itoa(lineOf(src)+1) + "] " + tt.want + "\n"
		if buf.String() != want {
			t.Errorf("%s: %q, want %q", tt.method, buf.String(), want)
		}
	}
	var nilSettings *Settings
	nilSettings.LogHTTP(context.Background(), slog.Default(), "GET", "/")
}

// With verbose logging off the HTTP line costs no allocation.
func TestLogHTTPOffAllocates(t *testing.T) {
	s := New("", Default())
	log := slog.New(s.Handler(&bytes.Buffer{}))
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { s.LogHTTP(ctx, log, "POST", "/v2/models/simple/infer") }); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// BenchmarkTextLine is the cost of one default-format line with two
// attributes.
func BenchmarkTextLine(b *testing.B) {
	s := New("", Default())
	log := slog.New(s.Handler(discard{}))
	b.ReportAllocs()
	for b.Loop() {
		log.Info("model loaded", "model", "simple", "version", 1)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
