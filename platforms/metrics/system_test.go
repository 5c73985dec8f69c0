package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	cpuFamilies    = []string{"nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"}
	pinnedFamilies = []string{"nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes"}
)

// The kB values of testdata/*/proc/meminfo.
const (
	memTotalKB      = 16318412
	poll1AvailKB    = 12345678
	poll2AvailKB    = 8159206
	pinnedDefault   = 268435456
	poll1To2Util    = 0.25 // busy +1000 jiffies, idle+iowait +3000
	sinceBootBusy   = 10600 + 250 + 3300 + 120 + 70 + 35
	sinceBootIdle   = 52900 + 1100
	sinceBootPoll2  = float64(sinceBootBusy) / float64(sinceBootBusy+sinceBootIdle)
	testdataMissing = "no-such-root"
)

// linuxCPU makes the CPU metrics available whatever the test's system, as
// the testdata stands in for /proc.
func linuxCPU(t *testing.T, supported bool) {
	t.Helper()
	old := cpuMetricsSupported
	cpuMetricsSupported = supported
	t.Cleanup(func() { cpuMetricsSupported = old })
}

func testdataConfig(root string) Config {
	cfg := DefaultConfig()
	cfg.procRoot = filepath.Join("testdata", root)
	return cfg
}

// scrape renders GET /metrics.
func scrape(t *testing.T, h *Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	return rec.Body.String()
}

// sample is the value of the unlabeled series name in text.
func sample(t *testing.T, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no unlabeled sample %s in\n%s", name, text)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSystemDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if !cfg.AllowCPU || !cfg.AllowGPU || cfg.Interval != 2*time.Second || cfg.PinnedPoolBytes != pinnedDefault {
		t.Errorf("defaults: cpu %v gpu %v interval %v pinned %d", cfg.AllowCPU, cfg.AllowGPU, cfg.Interval, cfg.PinnedPoolBytes)
	}
}

// TestCPUPolls drives polls over /proc snapshots: utilisation between two
// readings from the baseline taken at NewHandler, memory from one reading,
// 0 for what cannot be read (Triton's CPU metrics, triton-inference-server/core
// src/metrics.cc).
func TestCPUPolls(t *testing.T) {
	linuxCPU(t, true)
	h := NewHandler(noModels{}, testdataConfig("poll1"))
	text := scrape(t, h)
	for _, f := range append(cpuFamilies, pinnedFamilies...) {
		if !strings.Contains(text, "# TYPE "+f+" gauge\n") {
			t.Errorf("no gauge %s in\n%s", f, text)
		}
		if v := sample(t, text, f); v != 0 {
			t.Errorf("%s = %v before the first poll, want 0", f, v)
		}
	}

	steps := []struct {
		root              string
		util, total, used float64
	}{
		// From the baseline poll1: busy/(busy+idle) of the deltas.
		{"poll2", poll1To2Util, memTotalKB * 1024, (memTotalKB - poll2AvailKB) * 1024},
		// No jiffy elapsed: 0, not NaN.
		{"poll2", 0, memTotalKB * 1024, (memTotalKB - poll2AvailKB) * 1024},
		// Every counter went back: each delta clamps at 0.
		{"poll1", 0, memTotalKB * 1024, (memTotalKB - poll1AvailKB) * 1024},
		// Unparsable: every value 0 for this poll, baseline kept (poll1).
		{"malformed", 0, 0, 0},
		{"poll2", poll1To2Util, memTotalKB * 1024, (memTotalKB - poll2AvailKB) * 1024},
		{testdataMissing, 0, 0, 0},
		{"poll2", 0, memTotalKB * 1024, (memTotalKB - poll2AvailKB) * 1024},
	}
	for i, s := range steps {
		h.sys.cpu.root = filepath.Join("testdata", s.root)
		h.sys.pollOnce(discard())
		text := scrape(t, h)
		for name, want := range map[string]float64{
			"nv_cpu_utilization":                s.util,
			"nv_cpu_memory_total_bytes":         s.total,
			"nv_cpu_memory_used_bytes":          s.used,
			"nv_pinned_memory_pool_total_bytes": pinnedDefault,
			"nv_pinned_memory_pool_used_bytes":  0,
		} {
			if got := sample(t, text, name); got != want {
				t.Errorf("step %d (%s): %s = %v, want %v", i, s.root, name, got, want)
			}
		}
	}
}

// TestCPUBaselineUnreadable: without a baseline the first utilisation is
// the one since boot, as in Triton.
func TestCPUBaselineUnreadable(t *testing.T) {
	linuxCPU(t, true)
	h := NewHandler(noModels{}, testdataConfig(testdataMissing))
	if h.sys.cpu.initErr == nil {
		t.Fatal("no initialisation error without /proc")
	}
	h.sys.cpu.root = filepath.Join("testdata", "poll2")
	h.sys.pollOnce(discard())
	if got := sample(t, scrape(t, h), "nv_cpu_utilization"); got != sinceBootPoll2 {
		t.Errorf("utilization %v, want %v", got, sinceBootPoll2)
	}
}

func TestReadCPUTimes(t *testing.T) {
	const most = "18446744073709551615"
	for _, c := range []struct {
		name, text string
		want       cpuTimes
		wantErr    bool
	}{
		{"ten values", "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n", cpuTimes{1, 2, 3, 4, 5, 6, 7, 8}, false},
		{"eight values", "cpu 1 2 3 4 5 6 7 8\n", cpuTimes{1, 2, 3, 4, 5, 6, 7, 8}, false},
		{"largest", "cpu " + strings.Repeat(most+" ", 8) + "\n", cpuTimes{1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1}, false},
		{"seven values", "cpu 1 2 3 4 5 6 7\n", cpuTimes{}, true},
		{"not a number", "cpu 1 2 3 x 5 6 7 8\n", cpuTimes{}, true},
		{"negative", "cpu 1 2 3 -4 5 6 7 8\n", cpuTimes{}, true},
		{"overflow", "cpu 1 2 3 18446744073709551616 5 6 7 8\n", cpuTimes{}, true},
		{"per-cpu line first", "cpu0 1 2 3 4 5 6 7 8\ncpu 1 2 3 4 5 6 7 8\n", cpuTimes{}, true},
		{"aggregate not first", "intr 1\ncpu 1 2 3 4 5 6 7 8\n", cpuTimes{}, true},
		{"empty", "", cpuTimes{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "stat")
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readCPUTimes(p)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, c.want, c.wantErr)
			}
		})
	}
	if _, err := readCPUTimes(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestReadMemInfo(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       memInfo
		wantErr    bool
	}{
		{"both", "MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable: 40 kB\n", memInfo{100, 40}, false},
		{"available first", "MemAvailable: 40 kB\nMemTotal: 100 kB\n", memInfo{100, 40}, false},
		{"all available", "MemTotal: 100 kB\nMemAvailable: 100 kB\n", memInfo{100, 100}, false},
		// Lines not read are not parsed (Triton fails on any odd line).
		{"other odd lines", "MemTotal: 100 kB\nnoise\nMemFree: lots\nMemAvailable: 40 kB\n", memInfo{100, 40}, false},
		{"no MemAvailable", "MemTotal: 100 kB\nMemFree: 10 kB\n", memInfo{}, true},
		{"no MemTotal", "MemAvailable: 40 kB\n", memInfo{}, true},
		{"available above total", "MemTotal: 100 kB\nMemAvailable: 101 kB\n", memInfo{}, true},
		{"not a number", "MemTotal: 100 kB\nMemAvailable: x kB\n", memInfo{}, true},
		{"empty", "", memInfo{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readMemInfo(p)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, c.want, c.wantErr)
			}
		})
	}
}

func TestUtilization(t *testing.T) {
	prev := cpuTimes{user: 100, nice: 10, system: 50, idle: 1000, iowait: 20, irq: 5, softirq: 5, steal: 1}
	for _, c := range []struct {
		name string
		now  cpuTimes
		want float64
	}{
		{"busy only", cpuTimes{user: 110, nice: 10, system: 50, idle: 1000, iowait: 20, irq: 5, softirq: 5, steal: 1}, 1},
		{"idle only", cpuTimes{user: 100, nice: 10, system: 50, idle: 1090, iowait: 30, irq: 5, softirq: 5, steal: 1}, 0},
		{"every busy field", cpuTimes{user: 101, nice: 11, system: 51, idle: 1004, iowait: 20, irq: 6, softirq: 6, steal: 2}, 0.6},
		{"iowait is idle", cpuTimes{user: 103, nice: 10, system: 50, idle: 1000, iowait: 21, irq: 5, softirq: 5, steal: 1}, 0.75},
		// user went back (a wrap): its delta is 0, not a huge number.
		{"wrapped field", cpuTimes{user: 50, nice: 10, system: 80, idle: 1070, iowait: 20, irq: 5, softirq: 5, steal: 1}, 0.3},
		{"nothing elapsed", prev, 0},
		{"everything went back", cpuTimes{}, 0},
	} {
		if got := utilization(prev, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSystemFamilies: the pinned gauges exist whenever metrics are on, the
// CPU ones only with AllowCPU on Linux; a family without series is absent.
// cmd passes AllowCPU and AllowGPU ANDed with --allow-metrics, so "both
// off" is also what --allow-metrics=false gives.
func TestSystemFamilies(t *testing.T) {
	for _, c := range []struct {
		name            string
		cpu, gpu, linux bool
		wantCPU         bool
		wantPoll        bool
	}{
		{"cpu", true, false, true, true, true},
		{"cpu and gpu", true, true, true, true, true},
		{"gpu flag only", false, true, true, false, true},
		{"neither", false, false, true, false, false},
		{"cpu off linux", true, false, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			linuxCPU(t, c.linux)
			cfg := testdataConfig("poll1")
			cfg.AllowCPU, cfg.AllowGPU, cfg.PinnedPoolBytes = c.cpu, c.gpu, 1<<20
			h := NewHandler(noModels{}, cfg)
			text := scrape(t, h)
			for _, f := range cpuFamilies {
				if got := strings.Contains(text, f); got != c.wantCPU {
					t.Errorf("%s present %v, want %v:\n%s", f, got, c.wantCPU, text)
				}
			}
			for _, f := range pinnedFamilies {
				if v := sample(t, text, f); v != 0 {
					t.Errorf("%s = %v before any poll", f, v)
				}
			}
			if h.sys.poll != c.wantPoll {
				t.Fatalf("polls %v, want %v", h.sys.poll, c.wantPoll)
			}
			if !c.wantPoll {
				// Run returns at once: nothing polls, the gauges stay 0.
				done := make(chan struct{})
				go func() { h.Run(context.Background(), discard()); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("Run polls with neither CPU nor GPU metrics")
				}
				return
			}
			h.sys.pollOnce(discard())
			text = scrape(t, h)
			if v := sample(t, text, "nv_pinned_memory_pool_total_bytes"); v != 1<<20 {
				t.Errorf("pinned total %v, want %v", v, 1<<20)
			}
			if v := sample(t, text, "nv_pinned_memory_pool_used_bytes"); v != 0 {
				t.Errorf("pinned used %v, want 0", v)
			}
		})
	}
}

// TestPollPeriod: the poller sleeps half the interval, as Triton's does
// (triton-inference-server/core src/metrics.cc).
func TestPollPeriod(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		2000 * time.Millisecond: time.Second,
		100 * time.Millisecond:  50 * time.Millisecond,
		3 * time.Millisecond:    1500 * time.Microsecond,
		0:                       time.Millisecond,
		-time.Second:            time.Millisecond,
	} {
		if got := pollPeriod(in); got != want {
			t.Errorf("pollPeriod(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestRunLoop: Run polls until its context ends, logging the unreadable
// /proc once rather than at every poll.
func TestRunLoop(t *testing.T) {
	linuxCPU(t, true)
	cfg := testdataConfig(testdataMissing)
	cfg.Interval = 2 * time.Millisecond
	h := NewHandler(noModels{}, cfg)
	polled := make(chan struct{}, 1)
	h.sys.afterPoll = func() {
		select {
		case polled <- struct{}{}:
		default:
		}
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx, slog.New(slog.NewTextHandler(&logs, nil))); close(done) }()
	for range 3 {
		select {
		case <-polled:
		case <-time.After(10 * time.Second):
			t.Fatal("Run does not poll")
		}
	}
	// Scraping while Run polls (go test -race).
	if v := sample(t, scrape(t, h), "nv_pinned_memory_pool_total_bytes"); v != pinnedDefault {
		t.Errorf("pinned total %v after polls", v)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on after its context ended")
	}
	out := logs.String()
	for _, want := range []string{"CPU metrics may not be available", "/proc/stat can be read", "/proc/meminfo can be read"} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, out)
		}
	}
}

// TestOutageLogged: one warning when a file becomes unreadable, one line
// when it is back.
func TestOutageLogged(t *testing.T) {
	linuxCPU(t, true)
	h := NewHandler(noModels{}, testdataConfig("poll1"))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, root := range []string{"poll2", "malformed", "malformed", "poll2", "poll2"} {
		h.sys.cpu.root = filepath.Join("testdata", root)
		h.sys.pollOnce(log)
	}
	out := logs.String()
	for want, n := range map[string]int{
		"level=WARN": 2, "/proc/stat can be read": 1, "/proc/meminfo can be read": 1,
		"level=INFO": 2, "/proc/stat readable again": 1, "/proc/meminfo readable again": 1,
	} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("%q logged %d times, want %d:\n%s", want, got, n, out)
		}
	}
}

// TestRealProc reads this machine's /proc: utilisation within [0, 1] and
// used memory within the total (ranges, as memory changes between reads).
func TestRealProc(t *testing.T) {
	if !cpuMetricsSupported {
		t.Skip("CPU metrics are Linux only")
	}
	h := NewHandler(noModels{}, DefaultConfig())
	if h.sys.cpu.initErr != nil {
		t.Fatal(h.sys.cpu.initErr)
	}
	h.sys.pollOnce(discard())
	text := scrape(t, h)
	util := sample(t, text, "nv_cpu_utilization")
	total := sample(t, text, "nv_cpu_memory_total_bytes")
	used := sample(t, text, "nv_cpu_memory_used_bytes")
	if !(util >= 0 && util <= 1) {
		t.Errorf("utilization %v outside [0, 1]", util)
	}
	if !(total > 0 && used > 0 && used <= total) || float64(int64(total)/1024*1024) != total {
		t.Errorf("memory used %v, total %v", used, total)
	}
	if strings.Contains(text, "nv_cpu_utilization{") || strings.Contains(text, "nv_pinned_memory_pool_total_bytes{") {
		t.Errorf("labels on the system gauges:\n%s", text)
	}
}
