package onnxrt

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// cudaProviderInstalled reports whether `make ort-gpu` put the CUDA provider
// beside the ORT library.
func cudaProviderInstalled() bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(testBackend.opts.LibraryPath), "libonnxruntime_providers_cuda.so"))
	return err == nil
}

func simple(t *testing.T) (core.VersionFiles, *modelconfig.ModelConfig) {
	v := version(t, "m", ob.Must(ob.AddSub(ob.Int32, -1, 16)))
	return v, config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"}))
}

func TestKindGPUWithoutCUDA(t *testing.T) {
	if cudaProviderInstalled() {
		t.Skip("the CUDA execution provider is installed; TestKindGPUExecute covers KIND_GPU")
	}
	v, cfg := simple(t)
	in, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_GPU)
	if err == nil {
		in.Close()
		t.Fatal("KIND_GPU loaded without the CUDA provider")
	}
	for _, want := range []string{"KIND_GPU instance 'm_0' needs the ONNX Runtime CUDA execution provider: ", "libonnxruntime_providers", "run `make ort-gpu` on a machine with CUDA 13"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	cfg.Optimization = &modelconfig.ModelOptimizationPolicy{ExecutionAccelerators: &modelconfig.ModelOptimizationPolicy_ExecutionAccelerators{
		GpuExecutionAccelerator: []*modelconfig.ModelOptimizationPolicy_ExecutionAccelerators_Accelerator{{Name: "tensorrt"}},
	}}
	if _, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_GPU); err == nil || !strings.Contains(err.Error(), "needs the ONNX Runtime TensorRT execution provider") {
		t.Errorf("tensorrt accelerator: %v", err)
	}
}

// TestKindGPUExecute runs on the GPU when there is one; the same code path
// loads CPU instances, which every other test covers.
func TestKindGPUExecute(t *testing.T) {
	v, cfg := simple(t)
	in, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_GPU)
	if err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	defer in.Close()
	a := make([]float64, 16)
	for i := range a {
		a[i] = float64(i)
	}
	res := execute(t, in, []string{"OUTPUT0"}, tensor(t, "INPUT0", ob.Int32, []int64{1, 16}, a), tensor(t, "INPUT1", ob.Int32, []int64{1, 16}, a))
	for i, got := range decode(t, ob.Int32, res[0]) {
		if got != 2*a[i] {
			t.Fatalf("OUTPUT0[%d] = %v, want %v", i, got, 2*a[i])
		}
	}
}

func TestKindModelRunsOnCPU(t *testing.T) {
	v, cfg := simple(t)
	in, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_MODEL)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	x := tensor(t, "INPUT0", ob.Int32, []int64{1, 16}, make([]float64, 16))
	execute(t, in, []string{"OUTPUT1"}, x, tensor(t, "INPUT1", ob.Int32, []int64{1, 16}, make([]float64, 16)))
}

func accelerators(gpu ...*modelconfig.ModelOptimizationPolicy_ExecutionAccelerators_Accelerator) *modelconfig.ModelConfig {
	return &modelconfig.ModelConfig{Optimization: &modelconfig.ModelOptimizationPolicy{
		ExecutionAccelerators: &modelconfig.ModelOptimizationPolicy_ExecutionAccelerators{GpuExecutionAccelerator: gpu},
	}}
}

type accel = modelconfig.ModelOptimizationPolicy_ExecutionAccelerators_Accelerator

func TestPlanProviders(t *testing.T) {
	gpu := modelconfig.ModelInstanceGroup_KIND_GPU
	defaults := map[string]string{
		"device_id": "1", "cudnn_conv_algo_search": "EXHAUSTIVE", "gpu_mem_limit": "18446744073709551615",
		"arena_extend_strategy": "kNextPowerOfTwo", "do_copy_in_default_stream": "1",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range defaults {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	cfg := accelerators(
		&accel{Name: "cuda", Parameters: map[string]string{"cudnn_conv_algo_search": "HEURISTIC", "use_ep_level_unified_stream": "true", "tunable_op_enable": "1"}},
		&accel{Name: "tensorrt", Parameters: map[string]string{"precision_mode": "FP16", "max_workspace_size_bytes": "1073741824", "trt_engine_cache_enable": "on"}},
	)
	cfg.Parameters = map[string]*modelconfig.ModelParameter{"arena_extend_strategy": {StringValue: "1"}}
	plan, err := planProviders(cfg, gpu, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The deprecated keys always win over a cuda accelerator's (Triton quirk).
	if want := with("use_ep_level_unified_stream", "1", "tunable_op_enable", "1", "arena_extend_strategy", "kSameAsRequested"); !reflect.DeepEqual(plan.cuda, want) {
		t.Errorf("cuda options = %v, want %v", plan.cuda, want)
	}
	wantTRT := []map[string]string{{"device_id": "1", "trt_fp16_enable": "1", "trt_max_workspace_size": "1073741824", "trt_engine_cache_enable": "1"}}
	if !reflect.DeepEqual(plan.tensorrt, wantTRT) {
		t.Errorf("tensorrt options = %v, want %v", plan.tensorrt, wantTRT)
	}

	// CPU and MODEL instances ignore GPU accelerators, unknown ones included.
	for _, kind := range []modelconfig.ModelInstanceGroup_Kind{modelconfig.ModelInstanceGroup_KIND_CPU, modelconfig.ModelInstanceGroup_KIND_MODEL} {
		plan, err := planProviders(accelerators(&accel{Name: "foo"}), kind, 0)
		if err != nil || plan.cuda != nil || plan.tensorrt != nil {
			t.Errorf("%v: plan %+v, %v", kind, plan, err)
		}
	}

	for _, tc := range []struct {
		cfg  *modelconfig.ModelConfig
		want string
	}{
		{accelerators(&accel{Name: "foo"}), "unknown Execution Accelerator 'foo' is requested"},
		{accelerators(&accel{Name: "openvino"}), "unknown Execution Accelerator 'openvino' is requested"},
		{accelerators(&accel{Name: "tensorrt", Parameters: map[string]string{"foo": "1"}}), "unknown parameter 'foo' is provided for TensorRT Execution Accelerator"},
		{accelerators(&accel{Name: "tensorrt", Parameters: map[string]string{"precision_mode": "FP8"}}), "unsupported precision mode 'FP8' is requested"},
		{accelerators(&accel{Name: "tensorrt", Parameters: map[string]string{"trt_dla_enable": "yes"}}), "failed to convert 'yes' to boolean"},
		{accelerators(&accel{Name: "cuda", Parameters: map[string]string{"do_copy_in_default_stream": "2"}}), "failed to convert '2' to boolean"},
		{&modelconfig.ModelConfig{Parameters: map[string]*modelconfig.ModelParameter{"cudnn_conv_algo_search": {StringValue: "3"}}}, "unsupported cudnn_conv_algo_search 3"},
		{&modelconfig.ModelConfig{Parameters: map[string]*modelconfig.ModelParameter{"arena_extend_strategy": {StringValue: "2"}}}, "unsupported arena_extend_strategy 2"},
		{&modelconfig.ModelConfig{Parameters: map[string]*modelconfig.ModelParameter{"gpu_mem_limit": {StringValue: "lots"}}}, "failed to convert 'lots'"},
	} {
		_, err := planProviders(tc.cfg, gpu, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}

	// An unknown accelerator, through NewInstance: config errors come before the
	// missing-provider error.
	v, _ := simple(t)
	_, err = loadKind(v, config(t, ioConfig(8, ob.Int32, "16", []string{"INPUT0", "INPUT1"}, []string{"OUTPUT0", "OUTPUT1"})+
		`optimization { execution_accelerators { gpu_execution_accelerator { name: "foo" } } }`), gpu)
	if err == nil || err.Error() != "unknown Execution Accelerator 'foo' is requested" {
		t.Errorf("KIND_GPU with accelerator foo: %v", err)
	}
}
