package metrics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPrefetchGPUs: PrefetchGPUs opens the GPUs at once, in the
// background, and the handler made later reports what that opening found
// (devices, or why there are none) without opening them again; without GPU
// metrics nothing is opened.
func TestPrefetchGPUs(t *testing.T) {
	devices := map[string]*fakeGPU{"GPU-a": {}, "GPU-b": {}}
	second := "1"
	for _, c := range []struct {
		name     string
		allow    bool
		cpuOnly  bool
		visible  *string
		fail     error
		opens    int32
		reported []string // GPU UUIDs with series
		warn     bool
	}{
		{name: "all visible", allow: true, opens: 1, reported: []string{"GPU-a", "GPU-b"}},
		{name: "CUDA_VISIBLE_DEVICES", allow: true, visible: &second, opens: 1, reported: []string{"GPU-b"}},
		{name: "cannot start", allow: true, fail: errors.New("NVML: ERROR_LIBRARY_NOT_FOUND"), opens: 1, warn: true},
		{name: "flag off", allow: false},
		{name: "cpu only", allow: true, cpuOnly: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opens atomic.Int32
			started := make(chan struct{}, 1)
			release := make(chan struct{})
			closed := false
			fake := fakeOpener(devices, []string{"GPU-a", "GPU-b"}, &closed)
			cfg := DefaultConfig()
			cfg.AllowCPU, cfg.AllowGPU, cfg.CPUOnly, cfg.CUDAVisibleDevices = false, c.allow, c.cpuOnly, c.visible
			cfg.gpus = func(visible func(int, string) bool) ([]gpuDevice, func(), error) {
				opens.Add(1)
				started <- struct{}{}
				<-release
				if c.fail != nil {
					return nil, nil, c.fail
				}
				return fake(visible)
			}
			cfg = cfg.PrefetchGPUs()
			if c.opens > 0 {
				// The opening runs before any handler exists.
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("PrefetchGPUs did not start opening the GPUs")
				}
			}
			close(release)
			h := NewHandler(noModels{}, cfg)
			if got := opens.Load(); got != c.opens {
				t.Errorf("GPUs opened %d times, want %d", got, c.opens)
			}
			text := scrape(t, h)
			for _, uuid := range []string{"GPU-a", "GPU-b"} {
				_, got := gpuSample(text, "nv_gpu_utilization", uuid)
				want := strings.Contains(strings.Join(c.reported, " "), uuid)
				if got != want {
					t.Errorf("nv_gpu_utilization{gpu_uuid=%q} present %v, want %v:\n%s", uuid, got, want, text)
				}
			}
			var logs bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			h.Run(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := strings.Contains(logs.String(), "GPU metrics are not available"); got != c.warn {
				t.Errorf("warning logged %v, want %v:\n%s", got, c.warn, logs.String())
			}
			if len(c.reported) > 0 && !closed {
				t.Error("the GPU library was not released when the handler stopped")
			}
		})
	}
}
