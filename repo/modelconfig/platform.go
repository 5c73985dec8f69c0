package modelconfig

// Platform, backend and default file names the server recognises when it
// completes or checks a configuration.
const (
	PlatformEnsemble             = "ensemble"
	PlatformONNXRuntimeONNX      = "onnxruntime_onnx"
	PlatformTensorRTPlan         = "tensorrt_plan"
	PlatformTensorFlowGraphDef   = "tensorflow_graphdef"
	PlatformTensorFlowSavedModel = "tensorflow_savedmodel"
	PlatformPyTorchLibTorch      = "pytorch_libtorch"

	BackendONNXRuntime = "onnxruntime"
	BackendTensorRT    = "tensorrt"
	BackendTensorFlow  = "tensorflow"
	BackendPyTorch     = "pytorch"
	BackendOpenVINO    = "openvino"
	BackendPython      = "python"

	FilenameONNX                 = "model.onnx"
	FilenameTensorRTPlan         = "model.plan"
	FilenameTensorFlowGraphDef   = "model.graphdef"
	FilenameTensorFlowSavedModel = "model.savedmodel"
	FilenamePyTorch              = "model.pt"
	FilenamePyTorchAOTI          = "model.pt2"
	FilenameOpenVINO             = "model.xml"
	FilenamePython               = "model.py"
)

// backendKind groups platforms and backends that belong together; the
// zero value means "not one the server knows".
type backendKind int

const (
	kindUnknown backendKind = iota
	kindTensorFlow
	kindTensorRT
	kindONNXRuntime
	kindPyTorch
)

func backendKindOfBackend(backend string) backendKind {
	switch backend {
	case BackendTensorFlow:
		return kindTensorFlow
	case BackendTensorRT:
		return kindTensorRT
	case BackendONNXRuntime:
		return kindONNXRuntime
	case BackendPyTorch:
		return kindPyTorch
	}
	return kindUnknown
}

func backendKindOfPlatform(platform string) backendKind {
	switch platform {
	case PlatformTensorFlowGraphDef, PlatformTensorFlowSavedModel:
		return kindTensorFlow
	case PlatformTensorRTPlan:
		return kindTensorRT
	case PlatformONNXRuntimeONNX:
		return kindONNXRuntime
	case PlatformPyTorchLibTorch:
		return kindPyTorch
	}
	return kindUnknown
}

// IsEnsemble reports whether cfg describes an ensemble model.
func IsEnsemble(cfg *ModelConfig) bool {
	return cfg.GetPlatform() == PlatformEnsemble
}
