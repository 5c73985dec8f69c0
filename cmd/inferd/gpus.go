package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// usableGPUs lists the CUDA device ids a KIND_AUTO group may use: GPUs the
// NVIDIA driver reports (narrowed by CUDA_VISIBLE_DEVICES), and only when
// the ONNX Runtime CUDA provider sits beside the core library — without it
// a GPU is not usable by this server, so models fall back to CPU.
func usableGPUs(ortLib string, env environment, log *slog.Logger) []int32 {
	entries, err := os.ReadDir("/proc/driver/nvidia/gpus")
	if err != nil || len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ortLib), "libonnxruntime_providers_cuda.so")); err != nil {
		log.Warn("NVIDIA GPUs present but the ONNX Runtime CUDA provider is not beside the library; KIND_AUTO models run on CPU (make ort-gpu fetches it)", "gpus", len(entries))
		return nil
	}
	var ids []int32
	for i := range entries {
		ids = append(ids, int32(i))
	}
	if vis, ok := env.lookup("CUDA_VISIBLE_DEVICES"); ok {
		// Visible devices are renumbered from 0 by CUDA.
		n := 0
		for _, f := range strings.Split(vis, ",") {
			if _, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				n++
			}
		}
		ids = ids[:min(n, len(ids))]
	}
	return ids
}
