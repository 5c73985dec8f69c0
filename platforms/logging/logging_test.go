package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/core"
)

// Each switch and the verbose level decide on their own which lines show,
// and a change applies to the next line.
func TestSwitches(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   State
		want string // the messages that print, of V2 D I W E
	}{
		{"default", Default(), "IWE"},
		{"verbose 1", State{Info: true, Warning: true, Error: true, Verbose: 1}, "DIWE"},
		{"verbose 2", State{Info: true, Warning: true, Error: true, Verbose: 2}, "V2DIWE"},
		{"info off", State{Warning: true, Error: true}, "WE"},
		{"warning off", State{Info: true, Error: true}, "IE"},
		{"only warning", State{Warning: true}, "W"},
		{"all off but verbose", State{Verbose: 3}, "V2D"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := New("", Default())
			log := slog.New(s.Handler(&buf))
			s.Update(func(st *State) { *st = tt.st })
			log.Log(context.Background(), Verbosity(2), "V2")
			log.Debug("D")
			log.Info("I")
			log.Warn("W")
			log.Error("E")
			got := ""
			for _, m := range []string{"V2", "D", "I", "W", "E"} {
				if strings.Contains(buf.String(), `] "`+m+`"`+"\n") {
					got += m
				}
			}
			if got != tt.want {
				t.Fatalf("printed %q, want %q:\n%s", got, tt.want, buf.String())
			}
		})
	}
}

// The format applies to the next line, also through loggers derived with
// With and WithGroup before the change.
func TestFormats(t *testing.T) {
	var buf bytes.Buffer
	s := New("", Default())
	log := slog.New(s.handler(&buf, 4242, fixedClock)).With("model", "simple").WithGroup("g")
	for _, tt := range []struct {
		format Format
		line   *regexp.Regexp
	}{
		{FormatDefault, regexp.MustCompile(`^I0309 06:05:03\.000012 4242 logging_test\.go:\d+\] "hello" model=simple g\.k=v\n$`)},
		{FormatISO8601, regexp.MustCompile(`^2026-03-09T06:05:03Z I 4242 logging_test\.go:\d+\] "hello" model=simple g\.k=v\n$`)},
		{FormatJSON, regexp.MustCompile(`^\{"time":"[^"]+","level":"INFO","msg":"hello","model":"simple","g":\{"k":"v"\}\}\n$`)},
	} {
		buf.Reset()
		s.Update(func(st *State) { st.Format = tt.format })
		log.Info("hello", "k", "v")
		if !tt.line.MatchString(buf.String()) {
			t.Errorf("%s: %q does not match %s", tt.format, buf.String(), tt.line)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Format
		ok   bool
	}{
		{"default", FormatDefault, true},
		{"ISO8601", FormatISO8601, true},
		{"json", FormatJSON, true},
		{"iso8601", FormatDefault, false},
		{"", FormatDefault, false},
	} {
		got, ok := ParseFormat(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseFormat(%q) = %v, %v", tt.in, got, ok)
		}
		if ok && got.String() != tt.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

// Every field survives a round trip through the packed word, the largest
// verbose level included.
func TestStateWord(t *testing.T) {
	for _, st := range []State{
		{},
		Default(),
		{Info: true, Verbose: 1<<32 - 1, Format: FormatJSON},
		{Warning: true, Verbose: 7, Format: FormatISO8601},
		{Error: true},
	} {
		if got := stateOf(st.word()); got != st {
			t.Errorf("%+v came back as %+v", st, got)
		}
	}
}

// Concurrent updates of different fields never undo each other (run
// under -race by make test).
func TestConcurrentUpdates(t *testing.T) {
	s := New("f", State{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 1000 {
				s.Update(func(st *State) {
					switch i {
					case 0:
						st.Info = true
					case 1:
						st.Warning = true
					case 2:
						st.Error = true
					default:
						st.Verbose++
					}
				})
			}
		})
	}
	wg.Wait()
	if got := s.Load(); got != (State{Info: true, Warning: true, Error: true, Verbose: 1000}) {
		t.Fatalf("state %+v", got)
	}
	if s.File() != "f" {
		t.Fatalf("file %q", s.File())
	}
}

func request() *core.InferRequest {
	return &core.InferRequest{ID: "7", ModelName: "simple", ModelVersion: 1, Inputs: []*core.Tensor{
		{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1, 16}},
		{Name: "INPUT1", DataType: core.TypeFP32, Shape: []int64{2}},
	}}
}

// Level 1 logs the request's path, model and version; level 2 its inputs.
func TestLogRequest(t *testing.T) {
	for _, tt := range []struct {
		verbose uint32
		want    map[string]any // nil: no line
	}{
		{0, nil},
		{1, map[string]any{"msg": "inference request", "protocol": "HTTP", "path": "/v2/models/simple/infer", "model": "simple", "version": "1", "id": "7"}},
		{2, map[string]any{"msg": "inference request", "protocol": "HTTP", "path": "/v2/models/simple/infer", "model": "simple", "version": "1", "id": "7",
			"inputs": "INPUT0 INT32 [1,16], INPUT1 FP32 [2]"}},
	} {
		var buf bytes.Buffer
		s := New("", State{Info: true, Verbose: tt.verbose, Format: FormatJSON})
		s.LogRequest(context.Background(), slog.New(s.Handler(&buf)), "HTTP", "/v2/models/simple/infer", request())
		if tt.want == nil {
			if buf.Len() != 0 {
				t.Errorf("verbose 0 logged %s", buf.String())
			}
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("verbose %d: %v: %s", tt.verbose, err, buf.String())
		}
		delete(got, "time")
		delete(got, "level")
		if len(got) != len(tt.want) {
			t.Errorf("verbose %d: %v, want %v", tt.verbose, got, tt.want)
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("verbose %d: %s = %v, want %v", tt.verbose, k, got[k], v)
			}
		}
	}
	var nilSettings *Settings
	nilSettings.LogRequest(context.Background(), slog.Default(), "HTTP", "/", request())
}

// A request of a sequence logs its correlation id, a number or a string,
// and its flags, as Triton's request dump does
// (triton-inference-server/core src/infer_request.cc, operator<<).
func TestLogRequestSequence(t *testing.T) {
	for _, tt := range []struct {
		c    core.Correlation
		want map[string]any
	}{
		{core.Correlation{ID: 1000, Flags: core.FlagSequenceStart}, map[string]any{"correlation_id": float64(1000), "flags": float64(1)}},
		{core.Correlation{StringID: "seq-a", IsString: true, Flags: core.FlagSequenceEnd}, map[string]any{"correlation_id": "seq-a", "flags": float64(2)}},
		{core.Correlation{ID: 7}, map[string]any{"correlation_id": float64(7)}},
		{core.Correlation{}, map[string]any{}},
	} {
		var buf bytes.Buffer
		s := New("", State{Info: true, Verbose: 1, Format: FormatJSON})
		req := request()
		req.Correlation = tt.c
		s.LogRequest(context.Background(), slog.New(s.Handler(&buf)), "GRPC", "ModelStreamInfer", req)
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%+v: %v: %s", tt.c, err, buf.String())
		}
		for _, k := range []string{"correlation_id", "flags"} {
			if got[k] != tt.want[k] {
				t.Errorf("%+v: %s = %v, want %v", tt.c, k, got[k], tt.want[k])
			}
		}
	}
}

// With verbose logging off the request path allocates nothing.
func TestLogRequestOffAllocates(t *testing.T) {
	s := New("", Default())
	log := slog.New(s.Handler(&bytes.Buffer{}))
	req, ctx := request(), context.Background()
	if n := testing.AllocsPerRun(100, func() { s.LogRequest(ctx, log, "HTTP", "/v2/models/simple/infer", req) }); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// BenchmarkLogRequestOff is the cost the request path pays for verbose
// logging while it is off.
func BenchmarkLogRequestOff(b *testing.B) {
	s := New("", Default())
	log := slog.New(s.Handler(&bytes.Buffer{}))
	req, ctx := request(), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s.LogRequest(ctx, log, "HTTP", "/v2/models/simple/infer", req)
	}
}
