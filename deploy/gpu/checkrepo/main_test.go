package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/repo/modelconfig"
)

// TestWrite checks the repository's configs as the server reads them: the
// GPU models only load on a GPU host, so CI sees them nowhere else.
func TestWrite(t *testing.T) {
	root := filepath.Join(t.TempDir(), "models")
	if err := write(root); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		kind    modelconfig.ModelInstanceGroup_Kind
		count   int32
		accel   string
		batcher bool
	}{
		{"simple", modelconfig.ModelInstanceGroup_KIND_CPU, 1, "", false},
		{"simple_gpu", modelconfig.ModelInstanceGroup_KIND_GPU, 1, "", false},
		{"simple_trt", modelconfig.ModelInstanceGroup_KIND_GPU, 1, "tensorrt", false},
		{"mlp_gpu", modelconfig.ModelInstanceGroup_KIND_GPU, 1, "", true},
		{"mlp_cpu", modelconfig.ModelInstanceGroup_KIND_CPU, 2, "", true},
		{"id16m_gpu", modelconfig.ModelInstanceGroup_KIND_GPU, 1, "", false},
		{"id16m_cpu", modelconfig.ModelInstanceGroup_KIND_CPU, 1, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, tc.name, "config.pbtxt"))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := modelconfig.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := modelconfig.Normalize(cfg, tc.name, true); err != nil {
				t.Fatal(err)
			}
			if cfg.Name != tc.name || len(cfg.InstanceGroup) != 1 || cfg.InstanceGroup[0].Kind != tc.kind || cfg.InstanceGroup[0].Count != tc.count {
				t.Errorf("name %q, instance groups %v", cfg.Name, cfg.InstanceGroup)
			}
			var accel string
			if ea := cfg.GetOptimization().GetExecutionAccelerators(); ea != nil && len(ea.GpuExecutionAccelerator) == 1 {
				accel = ea.GpuExecutionAccelerator[0].Name
			}
			if accel != tc.accel || (cfg.GetDynamicBatching() != nil) != tc.batcher {
				t.Errorf("accelerator %q, dynamic batching %v", accel, cfg.GetDynamicBatching())
			}
			if st, err := os.Stat(filepath.Join(root, tc.name, "1", "model.onnx")); err != nil || st.Size() == 0 {
				t.Errorf("model file: %v", err)
			}
		})
	}
	// One MLP file, linked, so that the bundle holds it once.
	gpu, err := os.Stat(filepath.Join(root, "mlp_gpu", "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := os.Stat(filepath.Join(root, "mlp_cpu", "1", "model.onnx"))
	if err != nil || !os.SameFile(gpu, cpu) {
		t.Errorf("mlp_cpu's model file is not mlp_gpu's: %v", err)
	}
	if err := write(root); err == nil {
		t.Error("writing over an existing repository succeeded")
	}
}
