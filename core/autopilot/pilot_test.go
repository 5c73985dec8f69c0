package autopilot

import (
	"strings"
	"testing"
	"time"

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
