package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// --reuse-http-port: two servers bind one port.
func TestReuseHTTPPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	must(t, ln.Close())
	args := []string{"--model-repository=../../examples/model_repository", "--http-port=" + strconv.Itoa(port), "--allow-metrics=false"}
	a := start(t, append(args, "--reuse-http-port=true")...)
	if a.http == "" {
		t.Fatal("first server did not start")
	}
	b := start(t, append(args, "--reuse-http-port=true")...)
	if b.http != a.http {
		t.Fatalf("second server on %q, want the shared %q", b.http, a.http)
	}
	// Without the option the port is taken.
	cfg, err := parseFlags(append(args, "--http-address=127.0.0.1"), &bytes.Buffer{})
	must(t, err)
	if err := run(context.Background(), cfg, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("third server without --reuse-http-port: %v", err)
	}
}

// --allow-cpu-metrics switches the nv_cpu_* families; --allow-metrics=false
// turns them off too; the pinned pool size is reported.
func TestCPUMetricsOptions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		cpu  bool
	}{
		{nil, true},
		{[]string{"--allow-cpu-metrics=false"}, false},
	} {
		r := start(t, append([]string{"--model-repository=../../examples/model_repository", "--metrics-interval-ms=10",
			"--pinned-memory-pool-byte-size=1024"}, tt.args...)...)
		_, body := get(t, r.metrics+"/metrics")
		if strings.Contains(body, "nv_cpu_utilization") != tt.cpu {
			t.Errorf("%v: nv_cpu_utilization present %v, want %v", tt.args, !tt.cpu, tt.cpu)
		}
		if !strings.Contains(body, "nv_pinned_memory_pool_total_bytes") {
			t.Errorf("%v: no pinned pool gauge", tt.args)
		}
		r.stop(t)
	}
}

// --log-info, --log-warning and --log-error switch their levels
// independently; --log-verbose adds debug lines.
func TestLogLevelSwitches(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // of D, I, W, E: the levels that print
	}{
		{nil, "IWE"},
		{[]string{"--log-verbose=1"}, "DIWE"},
		{[]string{"--log-info=false"}, "WE"},
		{[]string{"--log-warning=false"}, "IE"},
		{[]string{"--log-error=false", "--log-info=off"}, "W"},
	} {
		cfg, err := parseFlags(append([]string{"--model-repository=x", "--log-format=json", "--log-file=" + t.TempDir() + "/log"}, tt.args...), &bytes.Buffer{})
		must(t, err)
		log, closeLog, err := newLogger(cfg)
		must(t, err)
		log.Debug("D")
		log.Info("I")
		log.Warn("W")
		log.Error("E")
		closeLog()
		got := ""
		b, _ := os.ReadFile(cfg.logFile)
		for _, l := range []string{"D", "I", "W", "E"} {
			if strings.Contains(string(b), `"msg":"`+l+`"`) {
				got += l
			}
		}
		if got != tt.want {
			t.Errorf("%v: printed %q, want %q", tt.args, got, tt.want)
		}
	}
}
