package onnxrt

import (
	"math"
	"strconv"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// providerPlan is the execution-provider setup of one instance, worked out
// (and checked) before anything is appended, so that a config mistake is
// reported as such even on a machine that lacks the providers.
type providerPlan struct {
	tensorrt []map[string]string // one per tensorrt accelerator, in order
	cuda     map[string]string   // nil for CPU instances
}

// planProviders reads optimization.execution_accelerators and the deprecated
// CUDA parameters (triton-inference-server/onnxruntime_backend README.md,
// src/onnxruntime.cc).
func planProviders(cfg *modelconfig.ModelConfig, kind modelconfig.ModelInstanceGroup_Kind, deviceID int32) (*providerPlan, error) {
	eas := cfg.GetOptimization().GetExecutionAccelerators()
	// No CPU accelerator (OpenVINO) is built into the library inferd uses,
	// and Triton reports an unavailable one as unknown.
	for _, ea := range eas.GetCpuExecutionAccelerator() {
		return nil, unknownAccelerator(ea.GetName())
	}
	plan := &providerPlan{}
	if kind != modelconfig.ModelInstanceGroup_KIND_GPU {
		return plan, nil // gpu_execution_accelerator is ignored off GPU
	}
	device := strconv.Itoa(int(deviceID))
	plan.cuda = map[string]string{}
	for _, ea := range eas.GetGpuExecutionAccelerator() {
		switch ea.GetName() {
		case "tensorrt":
			opts, err := tensorRTOptions(ea.GetParameters())
			if err != nil {
				return nil, err
			}
			opts["device_id"] = device
			plan.tensorrt = append(plan.tensorrt, opts)
		case "cuda":
			for k, v := range ea.GetParameters() {
				if k == "do_copy_in_default_stream" || k == "use_ep_level_unified_stream" {
					b, err := parseBool(v)
					if err != nil {
						return nil, err
					}
					v = ortBool(b)
				}
				plan.cuda[k] = v
			}
		default:
			return nil, unknownAccelerator(ea.GetName())
		}
	}
	// Triton always writes the deprecated keys, from parameters or their
	// defaults, over any same-named `cuda` accelerator keys (a quirk kept on
	// purpose: configs were tuned that way).
	algo, err := intParam(cfg, "cudnn_conv_algo_search", 0)
	if err != nil {
		return nil, err
	}
	algos := []string{"EXHAUSTIVE", "HEURISTIC", "DEFAULT"}
	if algo < 0 || algo >= len(algos) {
		return nil, core.Errorf(core.CodeInvalidArg, "unsupported cudnn_conv_algo_search %d, expected 0, 1 or 2", algo)
	}
	plan.cuda["cudnn_conv_algo_search"] = algos[algo]
	limit := uint64(math.MaxUint64)
	if s, ok := param(cfg, "gpu_mem_limit"); ok {
		if limit, err = parseUint64(s); err != nil {
			return nil, err
		}
	}
	plan.cuda["gpu_mem_limit"] = strconv.FormatUint(limit, 10)
	strategy, err := intParam(cfg, "arena_extend_strategy", 0)
	if err != nil {
		return nil, err
	}
	strategies := []string{"kNextPowerOfTwo", "kSameAsRequested"}
	if strategy < 0 || strategy >= len(strategies) {
		return nil, core.Errorf(core.CodeInvalidArg, "unsupported arena_extend_strategy %d, expected 0 or 1", strategy)
	}
	plan.cuda["arena_extend_strategy"] = strategies[strategy]
	copyDefault := true
	if v, ok, err := boolParam(cfg, "do_copy_in_default_stream"); err != nil {
		return nil, err
	} else if ok {
		copyDefault = v
	}
	plan.cuda["do_copy_in_default_stream"] = ortBool(copyDefault)
	plan.cuda["device_id"] = device
	return plan, nil
}

func unknownAccelerator(name string) error {
	return core.Errorf(core.CodeInvalidArg, "unknown Execution Accelerator '%s' is requested", name)
}

// trtParam says how a Triton TensorRT accelerator parameter is checked.
type trtParam int

const (
	trtString trtParam = iota
	trtInt
	trtUint
	trtBool
)

// trtParams are the TensorRT accelerator keys Triton accepts
// (triton-inference-server/onnxruntime_backend src/onnxruntime.cc),
// all passed under their own name except the three renamed in
// tensorRTOptions.
var trtParams = map[string]trtParam{
	"max_workspace_size_bytes":          trtUint,
	"int8_calibration_table_name":       trtString,
	"int8_use_native_calibration_table": trtBool,
	"trt_max_partition_iterations":      trtInt,
	"trt_min_subgraph_size":             trtInt,
	"trt_dla_enable":                    trtBool,
	"trt_dla_core":                      trtInt,
	"trt_engine_cache_enable":           trtBool,
	"trt_engine_cache_path":             trtString,
	"trt_engine_cache_prefix":           trtString,
	"trt_dump_subgraphs":                trtBool,
	"trt_force_sequential_engine_build": trtBool,
	"trt_context_memory_sharing_enable": trtBool,
	"trt_layer_norm_fp32_fallback":      trtBool,
	"trt_timing_cache_enable":           trtBool,
	"trt_timing_cache_path":             trtString,
	"trt_force_timing_cache":            trtBool,
	"trt_detailed_build_log":            trtBool,
	"trt_build_heuristics_enable":       trtBool,
	"trt_sparsity_enable":               trtBool,
	"trt_builder_optimization_level":    trtInt,
	"trt_auxiliary_streams":             trtInt,
	"trt_tactic_sources":                trtString,
	"trt_extra_plugin_lib_paths":        trtString,
	"trt_profile_min_shapes":            trtString,
	"trt_profile_max_shapes":            trtString,
	"trt_profile_opt_shapes":            trtString,
	"trt_cuda_graph_enable":             trtBool,
	"trt_dump_ep_context_model":         trtBool,
	"trt_ep_context_file_path":          trtString,
	"trt_ep_context_embed_mode":         trtInt,
	"precision_mode":                    trtString,
}

var trtRenamed = map[string]string{
	"max_workspace_size_bytes":          "trt_max_workspace_size",
	"int8_calibration_table_name":       "trt_int8_calibration_table_name",
	"int8_use_native_calibration_table": "trt_int8_use_native_calibration_table",
}

// tensorRTOptions translates Triton's TensorRT accelerator parameters into
// ORT TensorRT provider options.
func tensorRTOptions(params map[string]string) (map[string]string, error) {
	opts := map[string]string{}
	for k, v := range params {
		kind, ok := trtParams[k]
		if !ok {
			return nil, core.Errorf(core.CodeInvalidArg, "unknown parameter '%s' is provided for TensorRT Execution Accelerator", k)
		}
		if k == "precision_mode" {
			switch v {
			case "FP32":
			case "FP16":
				opts["trt_fp16_enable"] = "1"
			case "BF16":
				opts["trt_bf16_enable"] = "1"
			case "INT8":
				opts["trt_int8_enable"] = "1"
			default:
				return nil, core.Errorf(core.CodeInvalidArg, "unsupported precision mode '%s' is requested", v)
			}
			continue
		}
		switch kind {
		case trtInt:
			n, err := parseInt(v)
			if err != nil {
				return nil, err
			}
			v = strconv.Itoa(n)
		case trtUint:
			n, err := parseUint64(v)
			if err != nil {
				return nil, err
			}
			v = strconv.FormatUint(n, 10)
		case trtBool:
			b, err := parseBool(v)
			if err != nil {
				return nil, err
			}
			v = ortBool(b)
		}
		if to, ok := trtRenamed[k]; ok {
			k = to
		}
		opts[k] = v
	}
	return opts, nil
}

// appendProviders registers the planned providers on so: TensorRT first,
// then CUDA, so ORT prefers them in that order.
func (p *providerPlan) appendProviders(so *ort.SessionOptions, instance string) error {
	for _, opts := range p.tensorrt {
		if err := appendTensorRT(so, opts); err != nil {
			return core.Errorf(core.CodeInvalidArg, "KIND_GPU instance '%s' needs the ONNX Runtime TensorRT execution provider: %v; run `make ort-gpu` on a machine with CUDA 13 and TensorRT", instance, err)
		}
	}
	if p.cuda == nil {
		return nil
	}
	if err := appendCUDA(so, p.cuda); err != nil {
		return core.Errorf(core.CodeInvalidArg, "KIND_GPU instance '%s' needs the ONNX Runtime CUDA execution provider: %v; run `make ort-gpu` on a machine with CUDA 13", instance, err)
	}
	return nil
}

func appendTensorRT(so *ort.SessionOptions, opts map[string]string) error {
	o, err := ort.NewTensorRTProviderOptions()
	if err != nil {
		return err
	}
	defer o.Destroy()
	if err := o.Update(opts); err != nil {
		return err
	}
	return so.AppendExecutionProviderTensorRT(o)
}

func appendCUDA(so *ort.SessionOptions, opts map[string]string) error {
	o, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return err
	}
	defer o.Destroy()
	if err := o.Update(opts); err != nil {
		return err
	}
	return so.AppendExecutionProviderCUDA(o)
}
