package autopilot

import (
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

func TestParseFlag(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		want     Target
		err      string
	}{
		{in: "m,p99_ms=50", name: "m", want: Target{P99: 50 * time.Millisecond}},
		{in: "m, p99_ms=2.5,period_ms=500,max_queue_delay_us=800", name: "m",
			want: Target{P99: 2500 * time.Microsecond, Period: 500 * time.Millisecond, MaxDelay: 800 * time.Microsecond}},
		{in: "m", err: "want <model>,p99_ms=<ms>"},
		{in: ",p99_ms=5", err: "want <model>"},
		{in: "m,period_ms=500", err: "p99_ms is required"},
		{in: "m,p99_ms=-1", err: "not a positive number"},
		{in: "m,p99_ms=NaN", err: "not a positive number"},
		{in: "m,p99=5", err: "unknown key"},
		{in: "m,p99_ms", err: "not <key>=<value>"},
		{in: "m,p99_ms=5,period_ms=0.001", err: "at least 100ms"},
		{in: "m,p99_ms=5,max_cpus=8,min_instances=2,dwell_periods=10", name: "m",
			want: Target{P99: 5 * time.Millisecond, MaxCPUs: 8, MinInstances: 2, Dwell: 10}},
		{in: "m,p99_ms=5,dwell_periods=4", err: "from 5 to"},
		{in: "m,p99_ms=5,max_cpus=0", err: "from 1 to"},
		{in: "m,p99_ms=5,min_instances=1.5", err: "not a whole number"},
	} {
		name, got, err := ParseFlag(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil || name != tc.name || got != tc.want:
			t.Errorf("%q: %q %+v %v", tc.in, name, got, err)
		}
	}
}

func TestTarget(t *testing.T) {
	cfg := func(params map[string]string) *modelconfig.ModelConfig {
		c := &modelconfig.ModelConfig{Name: "m", Parameters: map[string]*modelconfig.ModelParameter{}}
		for k, v := range params {
			c.Parameters[k] = &modelconfig.ModelParameter{StringValue: v}
		}
		return c
	}
	flag := New(Options{Targets: map[string]Target{"m": {P99: 30 * time.Millisecond}}})
	plain := New(Options{})
	for _, tc := range []struct {
		name   string
		p      *Pilot
		params map[string]string
		want   Target
		ok     bool
		err    string
	}{
		{"none", plain, nil, Target{}, false, ""},
		{"config", plain, map[string]string{ParamP99: "40", ParamPeriod: "1000"},
			Target{P99: 40 * time.Millisecond, Period: time.Second, MaxDelay: 20 * time.Millisecond}, true, ""},
		{"the command line wins, key by key", flag, map[string]string{ParamP99: "40", ParamMaxDelay: "500"},
			Target{P99: 30 * time.Millisecond, Period: DefaultPeriod, MaxDelay: 500 * time.Microsecond}, true, ""},
		{"bad parameter", plain, map[string]string{ParamP99: "soon"}, Target{}, false, "parameter slo_p99_ms"},
		{"the scaler's bounds", plain, map[string]string{ParamP99: "40", ParamMaxCPUs: "4", ParamMinInstances: "2", ParamDwell: "6"},
			Target{P99: 40 * time.Millisecond, Period: DefaultPeriod, MaxDelay: 20 * time.Millisecond, MaxCPUs: 4, MinInstances: 2, Dwell: 6}, true, ""},
		{"a dwell under the least", plain, map[string]string{ParamP99: "40", ParamDwell: "2"}, Target{}, false, "parameter slo_dwell_periods"},
		{"a period that would spin", plain, map[string]string{ParamP99: "40", ParamPeriod: "0.5"}, Target{}, false, "slo_period_ms: the period must be at least 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := tc.p.target("m", cfg(tc.params))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Errorf("%+v %v %v, want %+v %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func TestScaleBoundsOf(t *testing.T) {
	const tgt = 50 * time.Millisecond
	group := func(kind modelconfig.ModelInstanceGroup_Kind, count int32) *modelconfig.ModelInstanceGroup {
		return &modelconfig.ModelInstanceGroup{Kind: kind, Count: count}
	}
	cpu := modelconfig.ModelInstanceGroup_KIND_CPU
	for _, tc := range []struct {
		name    string
		backend string
		groups  []*modelconfig.ModelInstanceGroup
		params  map[string]string
		t       Target
		want    scaleBounds
		cur     shape
		why     string
	}{
		{name: "onnx: instances and threads", backend: "onnxruntime", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 4)},
			params: map[string]string{"intra_op_thread_count": "2"}, t: Target{P99: tgt, MaxCPUs: 8},
			want: scaleBounds{minN: 1, maxN: 4, cpus: 8, threads: true, target: tgt, dwell: DefaultDwell}, cur: shape{4, 2}},
		{name: "onnx with one instance: threads only", backend: "onnxruntime", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 1)},
			t: Target{P99: tgt, MaxCPUs: 2, Dwell: 7}, want: scaleBounds{minN: 1, maxN: 1, cpus: 2, threads: true, target: tgt, dwell: 7}, cur: shape{1, 0}},
		{name: "onnx sharing one session: no threads", backend: "onnxruntime", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 3)},
			params: map[string]string{"share_session_between_instances": "true"}, t: Target{P99: tgt, MaxCPUs: 2, MinInstances: 2},
			want: scaleBounds{minN: 2, maxN: 3, cpus: 2, target: tgt, dwell: DefaultDwell}, cur: shape{3, 0}},
		{name: "python: instances", backend: "python", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 2)}, t: Target{P99: tgt, MaxCPUs: 2},
			want: scaleBounds{minN: 1, maxN: 2, cpus: 2, target: tgt, dwell: DefaultDwell}, cur: shape{2, 0}},
		{name: "python with one instance: nothing to do", backend: "python", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 1)}, t: Target{P99: tgt},
			why: "leave no choice"},
		{name: "GPU: left as configured", backend: "onnxruntime", groups: []*modelconfig.ModelInstanceGroup{group(modelconfig.ModelInstanceGroup_KIND_GPU, 2)},
			t: Target{P99: tgt}, why: "KIND_GPU instances"},
		{name: "two groups", backend: "onnxruntime", groups: []*modelconfig.ModelInstanceGroup{group(cpu, 1), group(cpu, 1)}, t: Target{P99: tgt}, why: "2 instance groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &modelconfig.ModelConfig{Backend: tc.backend, InstanceGroup: tc.groups, Parameters: map[string]*modelconfig.ModelParameter{}}
			for k, v := range tc.params {
				cfg.Parameters[k] = &modelconfig.ModelParameter{StringValue: v}
			}
			b, cur, why := scaleBoundsOf(cfg, tc.t)
			if tc.why != "" {
				if !strings.Contains(why, tc.why) {
					t.Fatalf("why %q, want %q", why, tc.why)
				}
				return
			}
			if why != "" || b != tc.want || cur != tc.cur {
				t.Fatalf("%+v %v %q, want %+v %v", b, cur, why, tc.want, tc.cur)
			}
		})
	}
}

// TestRetuned: the config a scaler reloads with has the shape and the
// batching in force, and leaves the version's own config alone.
func TestRetuned(t *testing.T) {
	cfg := &modelconfig.ModelConfig{Backend: "onnxruntime",
		InstanceGroup:    []*modelconfig.ModelInstanceGroup{{Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Count: 2}},
		SchedulingChoice: &modelconfig.ModelConfig_DynamicBatching{DynamicBatching: &modelconfig.ModelDynamicBatching{MaxQueueDelayMicroseconds: 40000, PreferredBatchSize: []int32{16}}}}
	got := retuned(cfg, shape{1, 4}, core.BatchTuning{Delay: 500 * time.Microsecond, Preferred: []int64{6}}, true)
	if got.InstanceGroup[0].Count != 1 || got.Parameters["intra_op_thread_count"].GetStringValue() != "4" ||
		got.GetDynamicBatching().MaxQueueDelayMicroseconds != 500 || len(got.GetDynamicBatching().PreferredBatchSize) != 1 || got.GetDynamicBatching().PreferredBatchSize[0] != 6 {
		t.Fatalf("retuned: %v", got)
	}
	if cfg.InstanceGroup[0].Count != 2 || cfg.Parameters != nil || cfg.GetDynamicBatching().PreferredBatchSize[0] != 16 {
		t.Fatalf("the original changed: %v", cfg)
	}
	if s, ok := shapeOf(got, scaleBounds{threads: true}); !ok || s != (shape{1, 4}) {
		t.Fatalf("shapeOf the retuned config: %v %v", s, ok)
	}
	// Back to the first config's shape, which set no threads: the
	// parameter goes, so the copy is that shape (it stayed at 4 threads,
	// and the scaler took the reload for failed).
	back := retuned(got, shape{2, 0}, core.BatchTuning{}, true)
	if _, ok := back.Parameters["intra_op_thread_count"]; ok || back.InstanceGroup[0].Count != 2 {
		t.Fatalf("retuned back: %v", back)
	}
	if s, ok := shapeOf(back, scaleBounds{threads: true}); !ok || s != (shape{2, 0}) {
		t.Fatalf("shapeOf the config retuned back: %v %v", s, ok)
	}
	// Threads the scaler does not split (a shared session) stay as set.
	if kept := retuned(got, shape{2, 0}, core.BatchTuning{}, false); kept.Parameters["intra_op_thread_count"].GetStringValue() != "4" {
		t.Fatalf("retuned without threads: %v", kept)
	}
}

// FuzzTarget: the slo_* parameters come from config.pbtxt or a load
// request's config override; any text gives a target or an error, never
// a panic, and a target within the documented bounds.
func FuzzTarget(f *testing.F) {
	for _, seed := range [][2]string{{"50", "5"}, {"0.5", "4"}, {"NaN", "-1"}, {"1e9", "65536"}, {"", "1.5"}, {"25", "99999999999999999999"}} {
		f.Add(seed[0], seed[1])
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, p99, n string) {
		cfg := &modelconfig.ModelConfig{Parameters: map[string]*modelconfig.ModelParameter{
			ParamP99: {StringValue: p99}, ParamMaxCPUs: {StringValue: n}, ParamMinInstances: {StringValue: n}, ParamDwell: {StringValue: n}}}
		got, ok, err := p.target("m", cfg)
		if err != nil || !ok {
			return
		}
		if got.P99 <= 0 || got.MaxCPUs < 1 || got.MinInstances < 1 || got.Dwell < MinDwell || got.Dwell > 1<<16 {
			t.Fatalf("target out of bounds: %+v", got)
		}
	})
}
