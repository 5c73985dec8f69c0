package modelconfig

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultSequenceIdleMicroseconds replaces an unset (zero)
// sequence_batching.max_sequence_idle_microseconds.
const DefaultSequenceIdleMicroseconds = 1000 * 1000

// Normalize applies the server-side completion Triton performs on every
// poll/load, before any backend sees the configuration (NormalizeModelConfig
// and AutoCompleteBackendFields in triton-inference-server/core
// src/model_config_utils.cc): fill name, derive backend/platform/default file,
// default the version policy, preferred batch sizes, sequence idle time
// and pinned-memory settings.
//
// modelDirName is the model's directory name. firstSubdirHasModelONNX
// reports whether the lexicographically first subdirectory of the model
// directory (numeric or not) contains an entry named model.onnx; it is the
// only file-system probe the ONNX detection needs. Detections that would
// need other files (model.plan, model.savedmodel, ...) are not performed.
//
// A configuration whose backend cannot be determined (and that is not an
// ensemble) yields the "unexpected platform type" error.
func Normalize(cfg *ModelConfig, modelDirName string, firstSubdirHasModelONNX bool) error {
	if cfg == nil {
		return errors.New("normalize model config: nil config")
	}
	if cfg.GetName() == "" {
		cfg.Name = modelDirName
	}
	if err := completeBackendFields(cfg, modelDirName, firstSubdirHasModelONNX); err != nil {
		return err
	}
	if err := checkBackendKnown(cfg); err != nil {
		return err
	}
	normalizeDefaults(cfg)
	return nil
}

// completeBackendFields mirrors Triton's AutoCompleteBackendFields with
// its precedence: TensorFlow, TensorRT, ONNX Runtime, OpenVINO, PyTorch,
// Python, then the "<name>.<backend>" convention for custom backends. The
// first family that claims the configuration fills its missing fields and
// stops the search.
func completeBackendFields(cfg *ModelConfig, modelDirName string, firstSubdirHasModelONNX bool) error {
	// TensorFlow: only an explicit platform or default file name is used;
	// inspecting version directories for TF files is not supported.
	if cfg.Platform == "" && (cfg.Backend == "" || cfg.Backend == BackendTensorFlow) {
		switch cfg.DefaultModelFilename {
		case FilenameTensorFlowSavedModel:
			cfg.Platform = PlatformTensorFlowSavedModel
		case FilenameTensorFlowGraphDef:
			cfg.Platform = PlatformTensorFlowGraphDef
		}
	}
	if cfg.Platform == PlatformTensorFlowSavedModel || cfg.Platform == PlatformTensorFlowGraphDef {
		fillIfEmpty(&cfg.Backend, BackendTensorFlow)
		if cfg.Platform == PlatformTensorFlowSavedModel {
			fillIfEmpty(&cfg.DefaultModelFilename, FilenameTensorFlowSavedModel)
		} else {
			fillIfEmpty(&cfg.DefaultModelFilename, FilenameTensorFlowGraphDef)
		}
		return nil
	}

	// TensorRT.
	if cfg.Backend == "" && (cfg.Platform == PlatformTensorRTPlan || cfg.DefaultModelFilename == FilenameTensorRTPlan) {
		cfg.Backend = BackendTensorRT
	}
	if cfg.Backend == BackendTensorRT {
		fillIfEmpty(&cfg.Platform, PlatformTensorRTPlan)
		fillIfEmpty(&cfg.DefaultModelFilename, FilenameTensorRTPlan)
		return nil
	}

	// ONNX Runtime. model.onnx may be a file or a directory (large models
	// with external data), so any entry of that name counts.
	if cfg.Backend == "" {
		if cfg.Platform == PlatformONNXRuntimeONNX || cfg.DefaultModelFilename == FilenameONNX {
			cfg.Backend = BackendONNXRuntime
		} else if cfg.Platform == "" && cfg.DefaultModelFilename == "" && firstSubdirHasModelONNX {
			cfg.Backend = BackendONNXRuntime
		}
	}
	if cfg.Backend == BackendONNXRuntime {
		fillIfEmpty(&cfg.Platform, PlatformONNXRuntimeONNX)
		fillIfEmpty(&cfg.DefaultModelFilename, FilenameONNX)
		return nil
	}

	// OpenVINO.
	if cfg.Backend == "" && cfg.DefaultModelFilename == FilenameOpenVINO {
		cfg.Backend = BackendOpenVINO
	}
	if cfg.Backend == BackendOpenVINO {
		fillIfEmpty(&cfg.DefaultModelFilename, FilenameOpenVINO)
		return nil
	}

	// PyTorch.
	if cfg.Backend == "" && (cfg.Platform == PlatformPyTorchLibTorch ||
		cfg.DefaultModelFilename == FilenamePyTorch || cfg.DefaultModelFilename == FilenamePyTorchAOTI) {
		cfg.Backend = BackendPyTorch
	}
	if cfg.Backend == BackendPyTorch {
		if cfg.Platform == "" {
			cfg.Platform = PlatformPyTorchLibTorch
			fillIfEmpty(&cfg.DefaultModelFilename, FilenamePyTorch)
		}
		return nil
	}

	// Python.
	if cfg.Backend == "" && cfg.DefaultModelFilename == FilenamePython {
		cfg.Backend = BackendPython
	}
	if cfg.Backend == BackendPython {
		fillIfEmpty(&cfg.DefaultModelFilename, FilenamePython)
		return nil
	}

	// Custom backend: with nothing to go on, a model named "<x>.<y>" is
	// served by backend "<y>" from file "model.<y>".
	if cfg.Backend == "" && cfg.Platform == "" && cfg.DefaultModelFilename == "" {
		dot := strings.IndexByte(modelDirName, '.')
		if dot < 0 {
			//lint:ignore ST1005 Triton's exact wording; operators grep logs for it.
			return fmt.Errorf("Invalid model name: Could not determine backend for model '%s' "+
				"with no backend in model configuration. Expected model name of the form "+
				"'model.<backend_name>'.", modelDirName)
		}
		backend := modelDirName[dot+1:]
		cfg.Backend = backend
		cfg.DefaultModelFilename = "model." + backend
	}
	return nil
}

// checkBackendKnown rejects a configuration left without a backend unless
// it is an ensemble (ensembles have none).
func checkBackendKnown(cfg *ModelConfig) error {
	if cfg.GetBackend() == "" && cfg.GetPlatform() != PlatformEnsemble {
		return fmt.Errorf("unexpected platform type '%s' for %s", cfg.GetPlatform(), cfg.GetName())
	}
	return nil
}

// normalizeDefaults is Triton's NormalizeModelConfig.
func normalizeDefaults(cfg *ModelConfig) {
	if cfg.VersionPolicy == nil {
		cfg.VersionPolicy = &ModelVersionPolicy{
			PolicyChoice: &ModelVersionPolicy_Latest_{Latest: &ModelVersionPolicy_Latest{NumVersions: 1}},
		}
	}

	if db := cfg.GetDynamicBatching(); db != nil {
		if len(db.PreferredBatchSize) == 0 && cfg.MaxBatchSize > 0 {
			db.PreferredBatchSize = []int32{cfg.MaxBatchSize}
		}
	}

	if sb := cfg.GetSequenceBatching(); sb != nil {
		if sb.MaxSequenceIdleMicroseconds == 0 {
			sb.MaxSequenceIdleMicroseconds = DefaultSequenceIdleMicroseconds
		}
		if oldest := sb.GetOldest(); oldest != nil {
			if len(oldest.PreferredBatchSize) == 0 && cfg.MaxBatchSize > 0 {
				oldest.PreferredBatchSize = []int32{cfg.MaxBatchSize}
			}
		}
	}

	// Keyed on the scheduling choice, not the platform, as Triton does;
	// filling optimization on an ensemble would make it invalid.
	if cfg.GetEnsembleScheduling() == nil {
		if cfg.Optimization == nil {
			cfg.Optimization = &ModelOptimizationPolicy{}
		}
		if cfg.Optimization.InputPinnedMemory == nil {
			cfg.Optimization.InputPinnedMemory = &ModelOptimizationPolicy_PinnedMemoryBuffer{Enable: true}
		}
		if cfg.Optimization.OutputPinnedMemory == nil {
			cfg.Optimization.OutputPinnedMemory = &ModelOptimizationPolicy_PinnedMemoryBuffer{Enable: true}
		}
	}
}

func fillIfEmpty(field *string, value string) {
	if *field == "" {
		*field = value
	}
}
