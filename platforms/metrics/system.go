package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Triton's defaults for the polled metrics (metrics_interval_ms_ and
// pinned_memory_pool_byte_size_ in triton-inference-server/server
// src/command_line_parser.h).
const (
	DefaultInterval        = 2000 * time.Millisecond
	DefaultPinnedPoolBytes = 256 << 20
)

// cpuMetricsSupported: Triton builds its CPU metrics on Linux only (they
// read /proc). A variable so that tests can play another system.
var cpuMetricsSupported = runtime.GOOS == "linux"

// system holds the gauges refreshed by the poller: pinned memory, GPU and
// CPU (triton-inference-server/server docs/user_guide/metrics.md;
// triton-inference-server/core src/metrics.cc).
type system struct {
	// poll: whether Run polls at all (CPU or GPU metrics requested).
	poll     bool
	interval time.Duration
	pinned   float64 // the configured pool size

	pinnedTotal, pinnedUsed prometheus.Gauge
	cpu                     *cpuGauges // nil when CPU metrics are off
	gpu                     *gpuGauges // nil when off or no GPU is visible
	gpuErr                  error      // why GPU monitoring did not start

	// afterPoll, when set (tests), runs after each poll of Run.
	afterPoll func()
}

// cpuGauges are the CPU families and the state between their polls.
type cpuGauges struct {
	util, memTotal, memUsed prometheus.Gauge
	// root holds proc/stat and proc/meminfo ("/" on a real system).
	root string

	mu   sync.Mutex
	last cpuTimes // the previous good /proc/stat reading
	// initErr is why the initial readings failed; failing says which file
	// failed at the last poll, so a log line is written once per outage.
	initErr error
	failing map[string]bool
}

// newSystem creates the families on reg: the pinned-memory gauges always
// (Triton creates them whenever metrics are on), the CPU ones when asked
// for on Linux, after reading the /proc/stat baseline of the first
// utilisation value.
func newSystem(reg *prometheus.Registry, cfg Config) *system {
	s := &system{
		poll:     cfg.AllowCPU || cfg.AllowGPU,
		interval: cfg.Interval,
		pinned:   float64(cfg.PinnedPoolBytes),
		pinnedTotal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nv_pinned_memory_pool_total_bytes", Help: "Pinned memory pool total memory size, in bytes"}),
		pinnedUsed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nv_pinned_memory_pool_used_bytes", Help: "Pinned memory pool used memory size, in bytes"}),
	}
	reg.MustRegister(s.pinnedTotal, s.pinnedUsed)
	if cfg.AllowCPU && cpuMetricsSupported {
		root := cfg.procRoot
		if root == "" {
			root = "/"
		}
		c := &cpuGauges{
			root: root,
			util: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "nv_cpu_utilization", Help: "CPU utilization rate [0.0 - 1.0]"}),
			memTotal: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "nv_cpu_memory_total_bytes", Help: "CPU total memory (RAM), in bytes"}),
			memUsed: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "nv_cpu_memory_used_bytes", Help: "CPU used memory (RAM), in bytes"}),
			failing: map[string]bool{},
		}
		// A failed baseline leaves zeros: the first good poll then reports
		// the utilisation since boot, as Triton does.
		var err error
		c.last, err = readCPUTimes(c.path("stat"))
		if _, merr := readMemInfo(c.path("meminfo")); merr != nil {
			err = errors.Join(err, merr)
		}
		c.initErr = err
		reg.MustRegister(c.util, c.memTotal, c.memUsed)
		s.cpu = c
	}
	if cfg.AllowGPU && !cfg.CPUOnly {
		open := cfg.gpus
		if open == nil {
			open = openNVML
		}
		s.gpu, s.gpuErr = newGPUGauges(reg, open, cfg.CUDAVisibleDevices)
	}
	return s
}

// pollPeriod is the poller's sleep: half the configured interval, as in
// Triton. A zero or negative interval (Triton spins, or never wakes) polls
// every millisecond.
func pollPeriod(interval time.Duration) time.Duration {
	return max(interval/2, time.Millisecond)
}

// run polls every pollPeriod until ctx ends; it returns at once when
// neither CPU nor GPU metrics were asked for.
func (s *system) run(ctx context.Context, log *slog.Logger) {
	if !s.poll {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	if s.cpu != nil && s.cpu.initErr != nil {
		log.Warn("CPU metrics may not be available", "err", s.cpu.initErr)
	}
	if s.gpuErr != nil {
		log.Warn("GPU metrics are not available", "err", s.gpuErr)
	}
	defer s.gpu.close()
	t := time.NewTicker(pollPeriod(s.interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.pollOnce(log)
		if s.afterPoll != nil {
			s.afterPoll()
		}
	}
}

// pollOnce refreshes every polled gauge. The server has no pinned pool, so
// nothing of it is ever used.
func (s *system) pollOnce(log *slog.Logger) {
	s.pinnedTotal.Set(s.pinned)
	s.pinnedUsed.Set(0)
	if s.cpu != nil {
		s.cpu.poll(log)
	}
	if s.gpu != nil {
		s.gpu.poll(log)
	}
}

func (c *cpuGauges) path(name string) string { return filepath.Join(c.root, "proc", name) }

// poll sets the CPU gauges; a value that cannot be read is 0 for this poll.
func (c *cpuGauges) poll(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	util := 0.0
	now, err := readCPUTimes(c.path("stat"))
	c.note(log, "stat", err)
	if err == nil {
		util = utilization(c.last, now)
		c.last = now
	}
	c.util.Set(util)

	total, used := 0.0, 0.0
	mem, err := readMemInfo(c.path("meminfo"))
	c.note(log, "meminfo", err)
	if err == nil {
		total, used = float64(mem.total)*1024, float64(mem.total-mem.available)*1024
	}
	c.memTotal.Set(total)
	c.memUsed.Set(used)
}

// note logs the first failure of an outage of file, and its end.
func (c *cpuGauges) note(log *slog.Logger, file string, err error) {
	switch {
	case err != nil && !c.failing[file]:
		log.Warn("CPU metrics: reporting 0 until /proc/"+file+" can be read", "err", err)
	case err == nil && c.failing[file]:
		log.Info("CPU metrics: /proc/" + file + " readable again")
	}
	c.failing[file] = err != nil
}

// cpuTimes are the aggregate jiffies of /proc/stat that Triton reads. guest
// and guest_nice are left out: the kernel counts them in user and nice.
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

// readCPUTimes reads the aggregate "cpu" line, which must come first.
func readCPUTimes(path string) (cpuTimes, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return cpuTimes{}, fmt.Errorf("%s: %w", path, err)
		}
		return cpuTimes{}, fmt.Errorf("%s: empty", path)
	}
	fields := strings.Fields(sc.Text())
	if len(fields) == 0 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("%s: the first line is not the aggregate cpu line", path)
	}
	if len(fields) < 9 {
		return cpuTimes{}, fmt.Errorf("%s: the cpu line has %d values, want at least 8", path, len(fields)-1)
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(fields[i+1], 10, 64); err != nil {
			return cpuTimes{}, fmt.Errorf("%s: cpu line: %w", path, err)
		}
	}
	return cpuTimes{user: v[0], nice: v[1], system: v[2], idle: v[3], iowait: v[4], irq: v[5], softirq: v[6], steal: v[7]}, nil
}

// utilization is busy/(busy+idle) between two readings, each delta clamped
// at 0 (a counter that went back). No elapsed jiffies at all gives 0, not
// Triton's NaN, so the gauge stays within [0, 1].
func utilization(prev, now cpuTimes) float64 {
	d := func(a, b uint64) uint64 {
		if b > a {
			return b - a
		}
		return 0
	}
	busy := d(prev.user, now.user) + d(prev.nice, now.nice) + d(prev.system, now.system) +
		d(prev.irq, now.irq) + d(prev.softirq, now.softirq) + d(prev.steal, now.steal)
	idle := d(prev.idle, now.idle) + d(prev.iowait, now.iowait)
	if busy+idle == 0 {
		return 0
	}
	return float64(busy) / float64(busy+idle)
}

// memInfo holds the /proc/meminfo values used, in kB.
type memInfo struct{ total, available uint64 }

// readMemInfo reads MemTotal and MemAvailable; both must be present and
// available must not exceed total. Other lines are not looked at.
func readMemInfo(path string) (memInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return memInfo{}, err
	}
	defer f.Close()
	var m memInfo
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || (fields[0] != "MemTotal:" && fields[0] != "MemAvailable:") {
			continue
		}
		v, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return memInfo{}, fmt.Errorf("%s: %s %w", path, fields[0], err)
		}
		if fields[0] == "MemTotal:" {
			m.total, haveTotal = v, true
		} else {
			m.available, haveAvail = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return memInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	if !haveTotal || !haveAvail {
		return memInfo{}, fmt.Errorf("%s: MemTotal or MemAvailable missing", path)
	}
	if m.available > m.total {
		return memInfo{}, fmt.Errorf("%s: MemAvailable %d kB exceeds MemTotal %d kB", path, m.available, m.total)
	}
	return m, nil
}
