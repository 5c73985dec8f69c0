package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceFlags runs the server with --trace-config in its forms and the
// deprecated --trace-* flags, and reads the settings route and the trace
// files they configure.
func TestTraceFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		args     []string
		settings string
		files    []string // written by the time the server has stopped
	}{
		{"trace-config", []string{"--trace-config=triton,file=" + filepath.Join(dir, "a.json"), "--trace-config=triton,log-frequency=1",
			"--trace-config=level=TIMESTAMPS", "--trace-config=rate=1", "--trace-config=count=2", "--trace-config=mode=triton"},
			`{"trace_level":["TIMESTAMPS"],"trace_rate":"1","trace_count":"2","log_frequency":"1","trace_file":"` + filepath.Join(dir, "a.json") + `","trace_mode":"triton"}`,
			[]string{"a.json.0"}},
		{"deprecated", []string{"--trace-file=" + filepath.Join(dir, "b.json"), "--trace-level=max", "--trace-level=TENSORS", "--trace-rate=1"},
			`{"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"1","trace_count":"-1","log_frequency":"0","trace_file":"` + filepath.Join(dir, "b.json") + `","trace_mode":"triton"}`,
			[]string{"b.json"}},
		{"trace-config wins over the deprecated flags", []string{"--trace-rate=9", "--trace-config=rate=3", "--trace-level=TIMESTAMPS", "--trace-config=level=OFF"},
			`{"trace_level":["OFF"],"trace_rate":"3","trace_count":"-1","log_frequency":"0","trace_file":"","trace_mode":"triton"}`, nil},
		{"opentelemetry", []string{"--trace-config=mode=opentelemetry", "--trace-config=opentelemetry,url=localhost:1/v1/traces"},
			`{"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","trace_mode":"opentelemetry","url":"localhost:1/v1/traces","bsp_max_queue_size":"2048","bsp_schedule_delay":"5000","bsp_max_export_batch_size":"512"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, append([]string{"--model-repository=../../examples/model_repository"}, tc.args...)...)
			if s, body := get(t, r.http+"/v2/trace/setting"); s != 200 || body != tc.settings {
				t.Fatalf("settings: %d %s\nwant %s", s, body, tc.settings)
			}
			for range 3 {
				if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
					t.Fatalf("infer: %d %s", s, body)
				}
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				var recs []map[string]any
				if err := json.Unmarshal(b, &recs); err != nil || !strings.Contains(string(b), `"model_name":"simple"`) {
					t.Fatalf("%s: %v %s", f, err, b)
				}
			}
		})
	}
	for _, bad := range []struct{ arg, want string }{
		{"--trace-config=level=loud", "invalid value for trace level option: loud"},
		{"--trace-config=jaeger,url=x", "invalid trace mode"},
		{"--trace-config=rate", "is not [<name>,]<setting>=<value>"},
		{"--trace-config=mode=opentelemetry", ""}, // valid
		{"--trace-rate=-1", "bad option --trace-rate: -1 is out of range [ 0, 2147483647 ]"},
		{"--trace-count=-2", "bad option --trace-count: -2 is out of range [ -1, 2147483647 ]"},
		{"--trace-log-frequency=-1", "bad option --trace-log-frequency: -1 is out of range [ 0, 2147483647 ]"},
		{"--trace-rate=4294967296", "out of range"}, // beyond an int: the option's own check
		{"--trace-config=rate=-1", "bad option --trace-config rate: -1 is out of range"},
		{"--trace-count=-1", ""}, // no limit
	} {
		_, err := parseFlags([]string{"--model-repository=/m", bad.arg}, io.Discard)
		if (bad.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), bad.want)) {
			t.Errorf("%s: %v, want %q", bad.arg, err, bad.want)
		}
	}
}
