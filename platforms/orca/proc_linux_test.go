package orca

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// writeRoot lays out proc and sys files under a fresh root.
func writeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo = "MemTotal:       16384 kB\nMemFree:         1024 kB\nMemAvailable:    8192 kB\n"

func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  float64
	}{
		{"machine", map[string]string{"proc/meminfo": meminfo}, 16384 * 1024},
		{"v2 no limit", map[string]string{"proc/meminfo": meminfo, "sys/fs/cgroup/memory.max": "max\n"}, 16384 * 1024},
		{"v2 limit", map[string]string{"proc/meminfo": meminfo, "sys/fs/cgroup/memory.max": "4194304\n"}, 4194304},
		{"v2 limit above machine", map[string]string{"proc/meminfo": meminfo, "sys/fs/cgroup/memory.max": "99999999999\n"}, 16384 * 1024},
		// v1 writes a huge number for "no limit".
		{"v1 unlimited", map[string]string{"proc/meminfo": meminfo, "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 16384 * 1024},
		{"v1 limit", map[string]string{"proc/meminfo": meminfo, "sys/fs/cgroup/memory/memory.limit_in_bytes": "2097152\n"}, 2097152},
		{"nothing readable", map[string]string{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := memoryLimit(writeRoot(t, c.files)); got != c.want {
				t.Fatalf("memoryLimit = %v, want %v", got, c.want)
			}
		})
	}
}

func TestAvailableCPUs(t *testing.T) {
	n := float64(runtime.NumCPU())
	for _, c := range []struct {
		name  string
		files map[string]string
		want  float64
	}{
		{"no cgroup", map[string]string{}, n},
		{"v2 max", map[string]string{"sys/fs/cgroup/cpu.max": "max 100000\n"}, n},
		{"v2 half", map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n"}, 0.5},
		{"v2 above machine", map[string]string{"sys/fs/cgroup/cpu.max": "100000000 100000\n"}, n},
		{"v1 quarter", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "25000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 0.25},
		{"v1 unlimited", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, n},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := availableCPUs(writeRoot(t, c.files)); got != c.want {
				t.Fatalf("availableCPUs = %v, want %v", got, c.want)
			}
		})
	}
}

// TestProcessFigures reads this process: memory from its statm over the
// limit, CPU over the time since the first sample, reused for procCache.
func TestProcessFigures(t *testing.T) {
	root := writeRoot(t, map[string]string{"proc/meminfo": meminfo, "proc/self/statm": "5000 1024 300 1 0 800 0\n"})
	t0 := time.Now()
	p := newProcess(root, t0)
	// Burn some CPU so that the figure is above zero.
	deadline := time.Now().Add(30 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	f := p.figures(time.Now())
	if want := 1024 * float64(os.Getpagesize()) / (16384 * 1024); f.mem != want {
		t.Errorf("mem = %v, want %v", f.mem, want)
	}
	if f.cpu <= 0 || f.cpu > float64(runtime.NumCPU()) {
		t.Errorf("cpu = %v after a busy loop", f.cpu)
	}
	if again := p.figures(p.last.Add(procCache / 2)); again != f {
		t.Errorf("within %v the figures changed: %v then %v", procCache, f, again)
	}
	if _, err := os.Stat("/proc/self/statm"); err == nil {
		if rss := residentBytes("/"); rss <= 0 {
			t.Errorf("this process's resident set read as %v", rss)
		}
	}
}
