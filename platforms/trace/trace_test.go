package trace

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
)

func TestStoi(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
		err  error
	}{
		{"5", 5, nil},
		{"  12abc", 12, nil},
		{"+7", 7, nil},
		{"-1", -1, nil},
		{"0x10", 0, nil},
		{"2147483647", math.MaxInt32, nil},
		{"-2147483648", math.MinInt32, nil},
		{"2147483648", 0, errOutOfRange},
		{"99999999999999999999", 0, errOutOfRange},
		{"x", 0, errNoDigits},
		{"", 0, errNoDigits},
		{"-", 0, errNoDigits},
		{" +", 0, errNoDigits},
	} {
		got, err := stoi(tc.in)
		if got != tc.want || err != tc.err {
			t.Errorf("stoi(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestUpdateSet(t *testing.T) {
	for _, tc := range []struct {
		key, val string
		err      string
		check    func(Update) bool
	}{
		{"trace_rate", "5", "", func(u Update) bool { return *u.Rate == 5 }},
		{"trace_rate", "-5", "", func(u Update) bool { return *u.Rate == math.MaxUint32-4 }},
		{"trace_rate", "x", "Unable to parse 'trace_rate', got: x", nil},
		{"trace_rate", "4294967296", "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 4294967296", nil},
		{"trace_count", "-2", "Unable to parse 'trace_count'. Expecting value >= -1, got:-2", nil},
		{"trace_count", "3000000000", "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 3000000000", nil},
		{"trace_count", "-1", "", func(u Update) bool { return *u.Count == -1 }},
		{"log_frequency", "7 traces", "", func(u Update) bool { return *u.LogFrequency == 7 }},
		{"log_frequency", "", "Unable to parse 'log_frequency', got: ", nil},
	} {
		var u Update
		err := u.Set(tc.key, tc.val, HTTPCountMsg)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%s=%q: err %v, want %q", tc.key, tc.val, err, tc.err)
		case tc.err != "" && core.CodeOf(err) != core.CodeInvalidArg:
			t.Errorf("%s=%q: code %v, want INVALID_ARG", tc.key, tc.val, core.CodeOf(err))
		case tc.err == "" && (err != nil || !tc.check(u)):
			t.Errorf("%s=%q: err %v, update %+v", tc.key, tc.val, err, u)
		}
	}
	var u Update
	if err := u.SetLevels([]string{"OFF", "TIMESTAMPS"}); err != ErrOffAndMore {
		t.Errorf("OFF with TIMESTAMPS: %v", err)
	}
	if err := u.SetLevels([]string{"nope"}); err != nil || u.Level != nil {
		t.Errorf("unknown level: %v, %v", err, u.Level)
	}
	if err := u.SetLevels([]string{"TENSORS", "TIMESTAMPS", "x"}); err != nil || *u.Level != LevelTimestamps|LevelTensors {
		t.Errorf("two levels: %v, %v", err, u.Level)
	}
}

func TestParseConfig(t *testing.T) {
	one := func(n int) *int { return &n }
	file := "/tmp/old.json"
	for _, tc := range []struct {
		name   string
		values []string
		dep    Deprecated
		want   Config
		err    string
	}{
		{name: "none", want: DefaultConfig()},
		{name: "triton forms", values: []string{"triton,file=/tmp/t.json", "triton,log-frequency=50", "rate=100", "level=TIMESTAMPS", "count=100"},
			want: Config{Level: LevelTimestamps, Rate: 100, Count: 100, LogFrequency: 50, File: "/tmp/t.json", URL: DefaultURL}},
		{name: "levels add up, any case", values: []string{"level=timestamps", "level=TENSORS"},
			want: Config{Level: LevelTimestamps | LevelTensors, Rate: 1000, Count: -1, URL: DefaultURL}},
		{name: "OFF wins", values: []string{"level=TIMESTAMPS", "level=off"}, want: DefaultConfig()},
		{name: "deprecated flags", dep: Deprecated{File: &file, Levels: []string{"max"}, Rate: one(3), Count: one(9), LogFrequency: one(2)},
			want: Config{Level: LevelTimestamps, Rate: 3, Count: 9, LogFrequency: 2, File: file, URL: DefaultURL}},
		{name: "trace-config overrides deprecated", values: []string{"rate=7", "triton,file=/new"}, dep: Deprecated{File: &file, Rate: one(3)},
			want: Config{Rate: 7, Count: -1, File: "/new", URL: DefaultURL}},
		{name: "opentelemetry", values: []string{"mode=opentelemetry", "opentelemetry,url=localhost:4318/v1/traces", "opentelemetry,resource=service.name=x",
			"opentelemetry,resource=k=v", "opentelemetry,bsp_schedule_delay=10", "triton,file=/ignored", "level=TIMESTAMPS", "rate=1"},
			want: Config{Level: LevelTimestamps, Rate: 1, Count: -1, Mode: ModeOpenTelemetry, URL: "localhost:4318/v1/traces",
				Resource: [][2]string{{"service.name", "x"}, {"k", "v"}}, BSPScheduleDelayMs: 10,
				Extra: [][2]string{{"url", "localhost:4318/v1/traces"}, {"resource", "service.name=x"}, {"resource", "k=v"}, {"bsp_schedule_delay", "10"},
					{"bsp_max_queue_size", "2048"}, {"bsp_max_export_batch_size", "512"}}}},
		{name: "bad mode", values: []string{"jaeger,url=x"}, err: "invalid value for trace mode option: jaeger"},
		{name: "bad level", values: []string{"level=loud"}, err: "invalid value for trace level option: loud"},
		{name: "bad rate", values: []string{"rate=often"}, err: "--trace-config rate"},
		{name: "no value", values: []string{"rate="}, err: "the format is"},
		{name: "no mode", values: []string{",rate=1"}, err: "no trace mode specified"},
		{name: "bad bsp", values: []string{"mode=opentelemetry", "opentelemetry,bsp_max_queue_size=-1"}, err: "bsp_max_queue_size"},
		// Negative or huge values would wrap (rate, log frequency: unsigned)
		// or mean nothing (count below -1): refused at start-up.
		{name: "negative deprecated rate", dep: Deprecated{Rate: one(-1)}, err: "bad option --trace-rate: -1 is out of range [ 0, 2147483647 ]"},
		{name: "huge deprecated rate", dep: Deprecated{Rate: one(1 << 32)}, err: "bad option --trace-rate: 4294967296 is out of range [ 0, 2147483647 ]"},
		{name: "deprecated count below -1", dep: Deprecated{Count: one(-2)}, err: "bad option --trace-count: -2 is out of range [ -1, 2147483647 ]"},
		{name: "huge deprecated count", dep: Deprecated{Count: one(1 << 31)}, err: "bad option --trace-count: 2147483648 is out of range [ -1, 2147483647 ]"},
		{name: "negative deprecated log frequency", dep: Deprecated{LogFrequency: one(-3)}, err: "bad option --trace-log-frequency: -3 is out of range [ 0, 2147483647 ]"},
		{name: "deprecated edges", dep: Deprecated{Rate: one(0), Count: one(-1), LogFrequency: one(math.MaxInt32)},
			want: Config{Rate: 0, Count: -1, LogFrequency: math.MaxInt32, URL: DefaultURL}},
		{name: "negative rate", values: []string{"rate=-1"}, err: "bad option --trace-config rate: -1 is out of range [ 0, 2147483647 ]"},
		{name: "count below -1", values: []string{"count=-2"}, err: "bad option --trace-config count: -2 is out of range [ -1, 2147483647 ]"},
		{name: "negative log frequency", values: []string{"triton,log-frequency=-1"}, err: "bad option --trace-config triton,log-frequency: -1 is out of range [ 0, 2147483647 ]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(tc.values, tc.dep)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func ptr[T any](v T) *T { return &v }

// TestUpdateFallback follows Triton's trace manager: a model's setting
// holds the values given for it and follows the global setting for the
// rest; clearing falls back (model → global → start-up).
func TestUpdateFallback(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File = filepath.Join(t.TempDir(), "t.json")
	cfg.Rate = 10
	m := newManager(t, cfg)
	step := func(model string, u Update) {
		t.Helper()
		if err := m.Update(model, u); err != nil {
			t.Fatal(err)
		}
	}
	check := func(model string, level Level, rate uint32) {
		t.Helper()
		s := m.Settings(model)
		if s.Level != level || s.Rate != rate {
			t.Fatalf("%q: level %v rate %d, want %v %d", model, s.Level, s.Rate, level, rate)
		}
	}
	step("m", Update{Rate: ptr[uint32](5)})
	check("m", 0, 5)
	check("", 0, 10)
	check("other", 0, 10)
	step("", Update{Level: ptr(LevelTimestamps), Rate: ptr[uint32](20)})
	check("m", LevelTimestamps, 5) // follows the global level, keeps its rate
	check("other", LevelTimestamps, 20)
	step("m", Update{ClearRate: true})
	check("m", LevelTimestamps, 20)
	step("", Update{ClearRate: true, ClearLevel: true})
	check("", 0, 10) // the start-up values
	check("m", 0, 10)
	if !m.snap.Load().on == (m.snap.Load().global.level != 0) {
		t.Fatal("on out of step")
	}
	// A setting that would trace but cannot is refused.
	err := m.Update("", Update{Level: ptr(LevelTimestamps), Rate: ptr[uint32](0)})
	if err == nil || err.Error() != "Attempting to set invalid trace setting :sample rate must be non-zero" {
		t.Fatalf("rate 0: %v", err)
	}
	noFile := newManager(t, DefaultConfig())
	err = noFile.Update("", Update{Level: ptr(LevelTimestamps)})
	if err == nil || err.Error() != "Attempting to set invalid trace setting :trace file name is not given" || core.CodeOf(err) != core.CodeInvalidArg {
		t.Fatalf("no file: %v", err)
	}
}

func TestSampling(t *testing.T) {
	cfg := DefaultConfig()
	cfg.File = filepath.Join(t.TempDir(), "t.json")
	cfg.Level, cfg.Rate, cfg.Count = LevelTimestamps, 3, 2
	m := newManager(t, cfg)
	var sampled []int
	for i := 1; i <= 12; i++ {
		if r := m.Start("m", nil); r != nil {
			sampled = append(sampled, i)
			r.Finish()
		}
	}
	if !reflect.DeepEqual(sampled, []int{3, 6}) {
		t.Fatalf("sampled %v, want every 3rd until the count of 2 is spent", sampled)
	}
	if c := m.Settings("").Count; c != 0 {
		t.Fatalf("remaining count %d", c)
	}
	off := newManager(t, DefaultConfig())
	if off.On() || off.Start("m", nil) != nil {
		t.Fatal("OFF traced")
	}
}

// TestSamplingConcurrent offers requests from many goroutines at once:
// the sampler, which counts them without its lock, still takes exactly
// every rate-th request and never more than the count.
func TestSamplingConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name              string
		rate              uint32
		count, want, reqs int32
	}{
		{"no count", 4, -1, 100, 400},
		{"count spent", 2, 7, 7, 400},
		{"count zero", 1, 0, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.File = filepath.Join(t.TempDir(), "t.json")
			cfg.Level, cfg.Rate, cfg.Count = LevelTimestamps, tc.rate, tc.count
			m := newManager(t, cfg)
			var sampled atomic.Int32
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range tc.reqs / 8 {
						if r := m.Start("m", nil); r != nil {
							sampled.Add(1)
							r.Finish()
						}
					}
				})
			}
			wg.Wait()
			if n := sampled.Load(); n != tc.want {
				t.Fatalf("sampled %d of %d, want %d", n, tc.reqs, tc.want)
			}
		})
	}
}

// request runs one traced request through the core.Trace hooks as the
// core does, with a child (an ensemble step).
func request(m *Manager, model string) {
	r := m.Start(model, nil)
	if r == nil {
		return
	}
	now := time.Now()
	r.Stamp("HTTP_RECV_START", now)
	c := r.Core()
	in := &core.Tensor{Name: "IN", DataType: core.TypeInt32, Shape: []int64{1, 2}, Data: binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 7), uint32(0xffffffff))}
	c.Begin(model, 1, "req-1", now, now.Add(time.Microsecond), []*core.Tensor{in})
	child := c.Child()
	child.Begin("step", 2, "", now.Add(2*time.Microsecond), now.Add(3*time.Microsecond), nil)
	child.End(core.TraceTimes{ComputeStart: now.Add(4 * time.Microsecond), ComputeInputEnd: now.Add(5 * time.Microsecond),
		ComputeOutputStart: now.Add(6 * time.Microsecond), ComputeEnd: now.Add(7 * time.Microsecond), RequestEnd: now.Add(8 * time.Microsecond)}, nil)
	c.Output([]*core.Tensor{{Name: "OUT", DataType: core.TypeFP32, Shape: []int64{2}, Data: binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5)), math.Float32bits(1e7))}})
	c.End(core.TraceTimes{RequestEnd: now.Add(9 * time.Microsecond)}, nil)
	r.Finish()
}

func readRecords(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, b)
	}
	return recs
}

// TestTritonFile checks the triton mode's records and where they go: the
// trace file at shutdown without a log frequency, <file>.<n> every
// log_frequency traces (and the rest at shutdown) with one.
func TestTritonFile(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = filepath.Join(dir, "t.json"), LevelTimestamps|LevelTensors, 1
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	request(m, "ens")
	if _, err := os.Stat(cfg.File); !os.IsNotExist(err) {
		t.Fatalf("trace file written before shutdown: %v", err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, cfg.File)
	var names []string
	for _, r := range recs {
		id := r["id"].(float64)
		switch {
		case r["model_name"] != nil:
			names = append(names, r["model_name"].(string))
			if r["model_name"] == "step" && (r["parent_id"] != float64(1) || id != 2) {
				t.Errorf("child record %v: want id 2, parent_id 1", r)
			}
			if r["model_name"] == "ens" && (r["request_id"] != "req-1" || r["parent_id"] != nil || r["model_version"] != float64(1)) {
				t.Errorf("parent record %v", r)
			}
		case r["timestamps"] != nil:
			ts := r["timestamps"].([]any)[0].(map[string]any)
			names = append(names, ts["name"].(string))
			if ts["ns"].(float64) <= 0 {
				t.Errorf("timestamp %v", ts)
			}
		case r["activity"] != nil:
			tensor := r["tensor"].(map[string]any)
			names = append(names, r["activity"].(string)+":"+tensor["data"].(string)+":"+tensor["shape"].(string)+":"+tensor["dtype"].(string))
		}
	}
	want := []string{"HTTP_RECV_START", "ens", "REQUEST_START", "QUEUE_START", "TENSOR_QUEUE_INPUT:7,-1:1,2:INT32",
		"TENSOR_BACKEND_OUTPUT:0.5,1e+07:2:FP32", "REQUEST_END",
		"step", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("records\n got %q\nwant %q", names, want)
	}

	// Rotation: log_frequency 2, five traces → t.json.0, .1 at once and
	// .2 (the fifth) at shutdown.
	cfg.File, cfg.LogFrequency, cfg.Level = filepath.Join(dir, "r.json"), 2, LevelTimestamps
	m, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		request(m, "m")
	}
	for i, want := range []int{2, 2} {
		if n := traces(readRecords(t, cfg.File+"."+string(rune('0'+i)))); n != want {
			t.Errorf("file %d holds %d traces, want %d", i, n, want)
		}
	}
	if _, err := os.Stat(cfg.File + ".2"); !os.IsNotExist(err) {
		t.Fatalf("third file before shutdown: %v", err)
	}
	_ = m.Close(context.Background())
	if n := traces(readRecords(t, cfg.File+".2")); n != 1 {
		t.Errorf("last file holds %d traces", n)
	}
	if _, err := os.Stat(cfg.File); !os.IsNotExist(err) {
		t.Errorf("the trace file itself is written with a log frequency: %v", err)
	}
}

// traces counts the client requests in records (their top-level model
// records: no parent).
func traces(recs []map[string]any) int {
	n := 0
	for _, r := range recs {
		if r["model_name"] != nil && r["parent_id"] == nil {
			n++
		}
	}
	return n
}

func TestTensorData(t *testing.T) {
	le := binary.LittleEndian
	bytesT := le.AppendUint32(nil, 2)
	bytesT = append(bytesT, "hi"...)
	bytesT = le.AppendUint32(bytesT, 0)
	for _, tc := range []struct {
		t    core.Tensor
		want string
	}{
		{core.Tensor{DataType: core.TypeBool, Shape: []int64{3}, Data: []byte{1, 0, 2}}, "1,0,1"},
		{core.Tensor{DataType: core.TypeInt8, Shape: []int64{2}, Data: []byte{0xff, 3}}, "-1,3"},
		{core.Tensor{DataType: core.TypeUint16, Shape: []int64{1}, Data: le.AppendUint16(nil, 65535)}, "65535"},
		{core.Tensor{DataType: core.TypeInt64, Shape: []int64{1}, Data: le.AppendUint64(nil, math.MaxUint64)}, "-1"},
		{core.Tensor{DataType: core.TypeFP64, Shape: []int64{1}, Data: le.AppendUint64(nil, math.Float64bits(1.0/3))}, "0.333333"},
		{core.Tensor{DataType: core.TypeFP16, Shape: []int64{1}, Data: []byte{0, 0}}, ""},
		{core.Tensor{DataType: core.TypeBytes, Shape: []int64{2}, Data: bytesT}, `"hi",""`},
		{core.Tensor{DataType: core.TypeBytes, Shape: []int64{2}, Data: bytesT[:5]}, ``}, // truncated: stop
	} {
		if got := tensorData(&tc.t); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.t.DataType, got, tc.want)
		}
	}
}

// TestOffCostsNothing: with tracing OFF, the frontends' hooks (On, Start
// with a carrier) allocate nothing.
func TestOffCostsNothing(t *testing.T) {
	m := newManager(t, DefaultConfig())
	h := propagation.HeaderCarrier(http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	if n := testing.AllocsPerRun(1000, func() {
		if m.On() || m.Start("simple", h) != nil {
			t.Fatal("traced")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per untraced request", n)
	}
}

// BenchmarkStartOff is the frontends' per-request cost with tracing OFF:
//
//	go test ./platforms/trace -run '^$' -bench BenchmarkStartOff -benchtime 1s -count 1
func BenchmarkStartOff(b *testing.B) {
	m, err := New(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := propagation.HeaderCarrier(http.Header{})
	b.ReportAllocs()
	for b.Loop() {
		if m.On() || m.Start("simple", h) != nil {
			b.Fatal("traced")
		}
	}
}
