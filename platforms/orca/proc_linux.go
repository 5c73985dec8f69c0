package orca

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// availableCPUs is the CPUs the process may use: those it may run on,
// fewer when a cgroup quota (v2 cpu.max, v1 cfs quota) says so.
func availableCPUs(root string) float64 {
	n := float64(runtime.NumCPU())
	if q, ok := cgroupCPUQuota(root); ok && q < n {
		return q
	}
	return n
}

func cgroupCPUQuota(root string) (float64, bool) {
	if b, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup/cpu.max")); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			quota, qerr := strconv.ParseFloat(f[0], 64)
			period, perr := strconv.ParseFloat(f[1], 64)
			if qerr == nil && perr == nil && quota > 0 && period > 0 {
				return quota / period, true
			}
		}
		return 0, false
	}
	quota, qerr := readNumber(filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
	period, perr := readNumber(filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us"))
	if qerr == nil && perr == nil && quota > 0 && period > 0 {
		return quota / period, true
	}
	return 0, false
}

// memoryLimit is the bytes the process may hold: its cgroup's limit (v2
// memory.max, v1 memory.limit_in_bytes) when below the machine's memory,
// else the machine's (MemTotal); 0 when neither can be read.
func memoryLimit(root string) float64 {
	total := memTotal(root)
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		// "max" (v2) does not parse: no limit.
		if v, err := readNumber(filepath.Join(root, p)); err == nil && v > 0 && (total == 0 || v < total) {
			return v
		}
	}
	return total
}

func memTotal(root string) float64 {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseFloat(fields[1], 64); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// residentBytes is the process's resident set (/proc/self/statm's second
// field, in pages); 0 when unreadable.
func residentBytes(root string) float64 {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/statm"))
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseFloat(string(f[1]), 64)
	if err != nil {
		return 0
	}
	return pages * float64(os.Getpagesize())
}

func readNumber(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}
