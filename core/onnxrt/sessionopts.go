package onnxrt

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Session config keys for ORT's thread-pool spinning.
const (
	keyIntraSpin = "session.intra_op.allow_spinning"
	keyInterSpin = "session.inter_op.allow_spinning"
)

// graphLevel maps optimization.graph.level (triton-inference-server/
// onnxruntime_backend README.md).
func graphLevel(cfg *modelconfig.ModelConfig) ort.GraphOptimizationLevel {
	switch cfg.GetOptimization().GetGraph().GetLevel() {
	case -1:
		return ort.GraphOptimizationLevelEnableBasic
	case 1:
		return ort.GraphOptimizationLevelEnableExtended
	case 2:
		return ort.GraphOptimizationLevelDisableAll
	}
	return ort.GraphOptimizationLevelEnableAll
}

// newSessionOptions builds the session options of one instance from the
// model config (optimization, parameters, model_operations) and the backend
// settings (triton-inference-server/onnxruntime_backend README.md). The
// caller destroys the result.
func (b *Backend) newSessionOptions(cfg *modelconfig.ModelConfig) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	if err := b.configureSession(so, cfg); err != nil {
		so.Destroy()
		return nil, err
	}
	return so, nil
}

func (b *Backend) configureSession(so *ort.SessionOptions, cfg *modelconfig.ModelConfig) error {
	if err := so.SetGraphOptimizationLevel(graphLevel(cfg)); err != nil {
		return fmt.Errorf("graph optimization level: %w", err)
	}

	mode, err := intParam(cfg, "execution_mode", 0)
	if err != nil {
		return err
	}
	if mode != 0 && mode != 1 {
		return core.Errorf(core.CodeInvalidArg, "Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 but got %d .", mode)
	}
	execMode := ort.ExecutionMode(ort.ExecutionModeSequential)
	if mode == 1 {
		execMode = ort.ExecutionModeParallel
	}
	if err := so.SetExecutionMode(execMode); err != nil {
		return fmt.Errorf("execution mode: %w", err)
	}

	if err := b.setThreads(so, cfg); err != nil {
		return err
	}

	if v, ok, err := boolParam(cfg, "enable_mem_arena"); err != nil {
		return err
	} else if ok {
		if err := so.SetCpuMemArena(v); err != nil {
			return fmt.Errorf("enable_mem_arena: %w", err)
		}
	}
	if v, ok, err := boolParam(cfg, "enable_mem_pattern"); err != nil {
		return err
	} else if ok {
		if err := so.SetMemPattern(v); err != nil {
			return fmt.Errorf("enable_mem_pattern: %w", err)
		}
	}

	if err := setSessionEntries(so, cfg); err != nil {
		return err
	}
	if err := registerCustomOps(so, cfg); err != nil {
		return err
	}
	return nil
}

// setThreads sizes the session's thread pools. With the global thread pool
// setting, the backend-wide counts apply and the model's are ignored, as in
// Triton; onnxruntime_go cannot create ORT's shared global pool, so each
// session gets pools of that size instead.
func (b *Backend) setThreads(so *ort.SessionOptions, cfg *modelconfig.ModelConfig) error {
	intra, inter := b.opts.IntraOpThreads, b.opts.InterOpThreads
	if !b.opts.EnableGlobalThreadpool {
		var err error
		if intra, err = intParam(cfg, "intra_op_thread_count", 0); err != nil {
			return err
		}
		if inter, err = intParam(cfg, "inter_op_thread_count", 0); err != nil {
			return err
		}
	}
	if intra > 0 {
		if err := so.SetIntraOpNumThreads(intra); err != nil {
			return fmt.Errorf("intra_op_thread_count: %w", err)
		}
	}
	if inter > 0 {
		if err := so.SetInterOpNumThreads(inter); err != nil {
			return fmt.Errorf("inter_op_thread_count: %w", err)
		}
	}
	return nil
}

// setSessionEntries writes session config entries. ORT's worker threads spin
// between ops by default, which keeps small machines' cores busy for no
// latency gain under a server's load pattern, so inferd turns spinning off
// unless the config asks for it: `allow_spinning` sets both pools, and raw
// session.* parameters, passed through verbatim, override either.
func setSessionEntries(so *ort.SessionOptions, cfg *modelconfig.ModelConfig) error {
	spin := "0"
	if v, ok, err := boolParam(cfg, "allow_spinning"); err != nil {
		return err
	} else if ok {
		spin = ortBool(v)
	}
	entries := map[string]string{keyIntraSpin: spin, keyInterSpin: spin}
	for k, p := range cfg.GetParameters() {
		if strings.HasPrefix(k, "session.") {
			entries[k] = p.GetStringValue()
		}
	}
	// Sorted, so that sessions of one config are built identically.
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		if err := so.AddSessionConfigEntry(k, entries[k]); err != nil {
			return core.Errorf(core.CodeInvalidArg, "session config entry %s=%q: %v", k, entries[k], err)
		}
	}
	return nil
}

// registerCustomOps loads model_operations.op_library_filename libraries.
// The names go to ONNX Runtime as they are, a host path as Triton
// documents them (triton-inference-server/server
// docs/user_guide/custom_operations.md): the repository's config is
// trusted with them, and a load override was held to the repository's
// names or the model folder before the backend saw it (core's
// checkOverride; docs/repositories.md, "Paths a config may name").
func registerCustomOps(so *ort.SessionOptions, cfg *modelconfig.ModelConfig) error {
	for _, lib := range cfg.GetModelOperations().GetOpLibraryFilename() {
		if err := registerCustomOpsLibrary(so, lib); err != nil {
			return core.Errorf(core.CodeInvalidArg, "register custom op library '%s': %v", lib, err)
		}
	}
	return nil
}
