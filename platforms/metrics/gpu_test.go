package metrics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var gpuFamilies = []string{"nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
	"nv_gpu_power_usage", "nv_gpu_power_limit", "nv_energy_consumption"}

// fakeGPU is an in-process device whose next readings the test sets; a
// reading with an error set fails.
type fakeGPU struct {
	mu                 sync.Mutex
	util, power, limit float64
	total, used        uint64
	energy             uint64
	fail               map[string]error
	calls              map[string]int
}

func (f *fakeGPU) read(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	return f.fail[name]
}

func (f *fakeGPU) Utilization() (float64, error) { return f.util, f.read("util") }
func (f *fakeGPU) Memory() (uint64, uint64, error) {
	return f.total, f.used, f.read("memory")
}
func (f *fakeGPU) PowerUsage() (float64, error) { return f.power, f.read("power") }
func (f *fakeGPU) PowerLimit() (float64, error) { return f.limit, f.read("limit") }
func (f *fakeGPU) Energy() (uint64, error)      { return f.energy, f.read("energy") }

func (f *fakeGPU) set(fn func(*fakeGPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeOpener serves devices as NVML would, after the visibility filter;
// closed reports whether the library was released.
func fakeOpener(devices map[string]*fakeGPU, order []string, closed *bool) gpuOpener {
	return func(visible func(int, string) bool) ([]gpuDevice, func(), error) {
		var out []gpuDevice
		for i, uuid := range order {
			if visible(i, uuid) {
				out = append(out, gpuDevice{uuid: uuid, r: devices[uuid]})
			}
		}
		return out, func() { *closed = true }, nil
	}
}

// gpuSample is one labelled GPU sample's value; ok false when absent.
func gpuSample(text, name, uuid string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + name + `\{gpu_uuid="` + regexp.QuoteMeta(uuid) + `"\} (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// TestGPUPolls follows two devices through polls: values and units, whole
// MiB, energy counted from the first reading, a failed reading read as 0
// (energy not counted), and a reading dropped after three failures in a
// row.
func TestGPUPolls(t *testing.T) {
	const gib = 1 << 30
	a := &fakeGPU{util: 0.37, power: 123.5, limit: 300, total: 16*gib + 12345, used: 3*gib + mib + 1, energy: 1_000_000}
	b := &fakeGPU{util: 1, power: 50, limit: 70, total: 8 * gib, used: 0, energy: 5}
	closed := false
	cfg := DefaultConfig()
	cfg.AllowCPU = false
	cfg.gpus = fakeOpener(map[string]*fakeGPU{"GPU-a": a, "GPU-b": b}, []string{"GPU-a", "GPU-b"}, &closed)
	h := NewHandler(noModels{}, cfg)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	check := func(step string, uuid string, want map[string]float64) {
		t.Helper()
		text := scrape(t, h)
		for name, w := range want {
			got, ok := gpuSample(text, name, uuid)
			if !ok || got != w {
				t.Errorf("%s: %s{gpu_uuid=%q} = %v (present %v), want %v", step, name, uuid, got, ok, w)
			}
		}
	}
	// Before the first poll every series exists at 0.
	check("created", "GPU-a", map[string]float64{"nv_gpu_utilization": 0, "nv_gpu_memory_total_bytes": 0, "nv_energy_consumption": 0})

	h.sys.pollOnce(log)
	check("poll 1", "GPU-a", map[string]float64{"nv_gpu_utilization": 0.37, "nv_gpu_memory_total_bytes": 16 * gib,
		"nv_gpu_memory_used_bytes": 3*gib + mib, "nv_gpu_power_usage": 123.5, "nv_gpu_power_limit": 300, "nv_energy_consumption": 0})
	check("poll 1", "GPU-b", map[string]float64{"nv_gpu_utilization": 1, "nv_gpu_memory_total_bytes": 8 * gib,
		"nv_gpu_memory_used_bytes": 0, "nv_gpu_power_usage": 50, "nv_gpu_power_limit": 70, "nv_energy_consumption": 0})

	// 2500 mJ later: 2.5 J. Utilization fails: 0 for this poll.
	a.set(func(f *fakeGPU) {
		f.energy += 2500
		f.fail = map[string]error{"util": errors.New("not supported")}
	})
	h.sys.pollOnce(log)
	check("poll 2", "GPU-a", map[string]float64{"nv_gpu_utilization": 0, "nv_energy_consumption": 2.5, "nv_gpu_power_usage": 123.5})

	// Energy fails: not counted; the delta is counted from the last good
	// reading once it reads again.
	a.set(func(f *fakeGPU) {
		f.energy += 1000
		f.util = 0.5
		f.fail = map[string]error{"energy": errors.New("busy")}
	})
	h.sys.pollOnce(log)
	check("poll 3", "GPU-a", map[string]float64{"nv_gpu_utilization": 0.5, "nv_energy_consumption": 2.5})
	a.set(func(f *fakeGPU) { f.fail = nil })
	h.sys.pollOnce(log)
	check("poll 4", "GPU-a", map[string]float64{"nv_energy_consumption": 3.5})

	// Power fails three times in a row: no longer read, kept at its value.
	a.set(func(f *fakeGPU) { f.fail = map[string]error{"power": errors.New("gone")} })
	for range 3 {
		h.sys.pollOnce(log)
	}
	a.set(func(f *fakeGPU) {
		f.fail = nil
		f.power = 99
	})
	calls := a.calls["power"]
	h.sys.pollOnce(log)
	if a.calls["power"] != calls {
		t.Errorf("power read again after %d failures in a row", maxGPUFailures)
	}
	check("poll 9", "GPU-a", map[string]float64{"nv_gpu_power_usage": 0, "nv_gpu_utilization": 0.5})
	if !strings.Contains(logs.String(), "power usage failed 3 times") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	// The other device was not affected.
	check("poll 9", "GPU-b", map[string]float64{"nv_gpu_power_usage": 50})

	// Run releases the library when it returns.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Run(ctx, log)
	if !closed {
		t.Error("the GPU library was not released when Run returned")
	}
}

// TestGPUFamiliesAbsent: GPU families are absent, and the server runs, when
// the flag is off, TRITON_SERVER_CPU_ONLY is set, no GPU is visible, or
// monitoring cannot start (with a warning).
func TestGPUFamiliesAbsent(t *testing.T) {
	devices := map[string]*fakeGPU{"GPU-a": {}}
	empty := ""
	for _, c := range []struct {
		name    string
		allow   bool
		cpuOnly bool
		visible *string
		open    gpuOpener
		warn    bool
	}{
		{"flag off", false, false, nil, nil, false},
		{"cpu only", true, true, nil, nil, false},
		{"none visible", true, false, &empty, nil, false},
		{"cannot start", true, false, nil, func(func(int, string) bool) ([]gpuDevice, func(), error) {
			return nil, nil, errors.New("NVML: library not found")
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			closed := false
			cfg := DefaultConfig()
			cfg.AllowGPU, cfg.CPUOnly, cfg.CUDAVisibleDevices = c.allow, c.cpuOnly, c.visible
			cfg.gpus = c.open
			if cfg.gpus == nil {
				cfg.gpus = fakeOpener(devices, []string{"GPU-a"}, &closed)
			}
			h := NewHandler(noModels{}, cfg)
			var logs bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			h.Run(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
			text := scrape(t, h)
			for _, f := range gpuFamilies {
				if strings.Contains(text, f) {
					t.Errorf("%s present:\n%s", f, text)
				}
			}
			if got := strings.Contains(logs.String(), "GPU metrics are not available"); got != c.warn {
				t.Errorf("warning logged %v, want %v:\n%s", got, c.warn, logs.String())
			}
		})
	}
}

func TestVisibleGPU(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		env  *string
		want []bool // for (0, GPU-aaa), (1, GPU-bbb), (2, GPU-ccc)
	}{
		{nil, []bool{true, true, true}},
		{s(""), []bool{false, false, false}},
		{s("1"), []bool{false, true, false}},
		{s("2, 0"), []bool{true, false, true}},
		{s("GPU-bb"), []bool{false, true, false}},
		{s("GPU-ccc,0"), []bool{true, false, true}},
		{s("MIG-x,-1,abc"), []bool{false, false, false}},
	} {
		vis := visibleGPU(c.env)
		for i, uuid := range []string{"GPU-aaa", "GPU-bbb", "GPU-ccc"} {
			if got := vis(i, uuid); got != c.want[i] {
				env := "<unset>"
				if c.env != nil {
					env = *c.env
				}
				t.Errorf("CUDA_VISIBLE_DEVICES=%q: device %d (%s) visible %v, want %v", env, i, uuid, got, c.want[i])
			}
		}
	}
}

// TestNVML runs the real NVML reader: on a machine without the NVIDIA
// driver (this test's usual one) opening fails, so the families are absent
// and Run warns; with a GPU each device's series carry real values.
func TestNVML(t *testing.T) {
	devices, closeLib, err := openNVML(visibleGPU(nil))
	cfg := DefaultConfig()
	cfg.AllowCPU = false
	h := NewHandler(noModels{}, cfg)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h.Run(ctx, log)
		text := scrape(t, h)
		for _, f := range gpuFamilies {
			if strings.Contains(text, f) {
				t.Errorf("%s present without NVML:\n%s", f, text)
			}
		}
		if !strings.Contains(logs.String(), "GPU metrics are not available") {
			t.Errorf("no warning:\n%s", logs.String())
		}
		t.Skipf("no GPU to read (%v): checked the families are absent and the warning logged", err)
	}
	defer closeLib()
	if len(devices) == 0 {
		t.Skip("NVML started but reports no GPU")
	}
	h.sys.pollOnce(log)
	time.Sleep(100 * time.Millisecond)
	h.sys.pollOnce(log)
	text := scrape(t, h)
	for _, d := range devices {
		for _, f := range gpuFamilies {
			v, ok := gpuSample(text, f, d.uuid)
			if !ok || v < 0 {
				t.Errorf("%s{gpu_uuid=%q} = %v (present %v)", f, d.uuid, v, ok)
			}
		}
		if u, _ := gpuSample(text, "nv_gpu_utilization", d.uuid); u > 1 {
			t.Errorf("utilization %v above 1", u)
		}
		for _, f := range []string{"nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes"} {
			if v, _ := gpuSample(text, f, d.uuid); int64(v)%mib != 0 {
				t.Errorf("%s = %v, not whole MiB", f, v)
			}
		}
		if total, _ := gpuSample(text, "nv_gpu_memory_total_bytes", d.uuid); total == 0 {
			t.Errorf("GPU %s total memory 0", d.uuid)
		}
	}
}
