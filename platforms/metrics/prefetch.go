package metrics

import "sync"

// PrefetchGPUs starts opening the GPUs that cfg's GPU metrics report, in
// the background, and returns a Config whose NewHandler takes that opening's
// result instead of opening them itself. NVML's initialisation and device
// enumeration take about 20 ms on a GPU host: a server calls this first, so
// they run beside ONNX Runtime's load rather than before the models' load.
// Set the Config's other fields first; without GPU metrics (AllowGPU false,
// or CPUOnly) cfg is returned as it is. Make one handler of the result:
// the opening's library release belongs to it.
func (cfg Config) PrefetchGPUs() Config {
	if !cfg.AllowGPU || cfg.CPUOnly {
		return cfg
	}
	open := cfg.gpus
	if open == nil {
		open = openNVML
	}
	type opened struct {
		devices  []gpuDevice
		closeLib func()
		err      error
	}
	done := make(chan opened, 1)
	visible := visibleGPU(cfg.CUDAVisibleDevices)
	go func() {
		var o opened
		o.devices, o.closeLib, o.err = open(visible)
		done <- o
	}()
	result := sync.OnceValue(func() opened { return <-done })
	// The visibility filter was applied by the opening above, from the
	// same CUDAVisibleDevices.
	cfg.gpus = func(func(int, string) bool) ([]gpuDevice, func(), error) {
		o := result()
		return o.devices, o.closeLib, o.err
	}
	return cfg
}
