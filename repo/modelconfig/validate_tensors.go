package modelconfig

import (
	"errors"
	"fmt"
	"math"
)

// WildcardDim is the dims/reshape value meaning "any size".
const WildcardDim = -1

// ValidateTensors checks inputs, outputs, batch inputs and batch outputs
// (Triton's ValidateModelIOConfig). With auto-complete off this is part of
// the poll-time validation; with it on, run it after the backend has
// completed the configuration.
func ValidateTensors(cfg *ModelConfig) error {
	if cfg == nil {
		return errors.New("validate model tensors: nil config")
	}
	for _, in := range cfg.GetInput() {
		if err := validateInput(in, cfg.GetMaxBatchSize(), cfg.GetPlatform()); err != nil {
			return fmt.Errorf("%w for %s", err, cfg.GetName())
		}
	}
	for _, out := range cfg.GetOutput() {
		if err := validateOutput(out, cfg.GetMaxBatchSize(), cfg.GetPlatform()); err != nil {
			return fmt.Errorf("%w for %s", err, cfg.GetName())
		}
	}
	if err := validateBatchIO(cfg); err != nil {
		return fmt.Errorf("%w for %s", err, cfg.GetName())
	}
	return nil
}

// tensorSpec is what inputs and outputs share for shape validation.
type tensorSpec interface {
	GetName() string
	GetDataType() DataType
	GetDims() []int64
	GetReshape() *ModelTensorReshape
	GetIsNonLinearFormatIo() bool
	GetIsShapeTensor() bool
}

func validateInput(in *ModelInput, maxBatchSize int32, platform string) error {
	if err := validateIOShape(in, maxBatchSize, "model input "); err != nil {
		return err
	}
	if f := in.GetFormat(); (f == ModelInput_FORMAT_NHWC || f == ModelInput_FORMAT_NCHW) && len(in.GetDims()) != 3 {
		return errors.New("model input NHWC/NCHW require 3 dims")
	}
	return validateTensorRTOnly(in, platform, "input")
}

func validateOutput(out *ModelOutput, maxBatchSize int32, platform string) error {
	if err := validateIOShape(out, maxBatchSize, "model output "); err != nil {
		return err
	}
	return validateTensorRTOnly(out, platform, "output")
}

// validateTensorRTOnly rejects tensor features only TensorRT implements.
func validateTensorRTOnly(t tensorSpec, platform, ioType string) error {
	if platform != PlatformTensorRTPlan && t.GetIsShapeTensor() {
		return errors.New("shape tensors are only supported for TensorRT platform")
	}
	if t.GetIsNonLinearFormatIo() {
		if platform != PlatformTensorRTPlan {
			//lint:ignore ST1005 Triton's exact wording.
			return errors.New("Non-linear IO format is only supported for the TensorRT platform")
		}
		if len(t.GetDims()) != 3 {
			//lint:ignore ST1005 Triton's exact wording.
			return fmt.Errorf("Non-linear IO format %s requires 3 dims", ioType)
		}
	}
	return nil
}

func validateIOShape(t tensorSpec, maxBatchSize int32, prefix string) error {
	if t.GetName() == "" {
		return fmt.Errorf("%smust specify 'name'", prefix)
	}
	prefix += "'" + t.GetName() + "' "

	if t.GetDataType() == DataType_TYPE_INVALID {
		return fmt.Errorf("%smust specify 'data_type'", prefix)
	}
	if len(t.GetDims()) == 0 {
		return fmt.Errorf("%smust specify 'dims'", prefix)
	}

	reshape := t.GetReshape()
	// Without a batch dimension an empty reshape would make the tensor a
	// scalar, which the server does not support.
	if reshape != nil && len(reshape.GetShape()) == 0 && maxBatchSize == 0 {
		return fmt.Errorf("%scannot have empty reshape for non-batching model as scalar tensors are not supported", prefix)
	}

	for _, d := range t.GetDims() {
		if d < 1 && d != WildcardDim {
			return fmt.Errorf("%sdimension must be integer >= 1, or %d to indicate a variable-size dimension",
				prefix, WildcardDim)
		}
	}

	if reshape == nil {
		return nil
	}
	for _, d := range reshape.GetShape() {
		if d < 1 && d != WildcardDim {
			return fmt.Errorf("%sreshape dimensions must be integer >= 1, or %d to indicate a variable-size dimension",
				prefix, WildcardDim)
		}
	}

	dimsSize, err := elementCount(t.GetDims(), t.GetName()+" dims")
	if err != nil {
		return err
	}
	reshapeSize, err := elementCount(reshape.GetShape(), t.GetName()+" reshape")
	if err != nil {
		return err
	}
	// An empty reshape (element count 0 here) is accepted for dims holding
	// exactly one element.
	if dimsSize != reshapeSize && (reshapeSize != 0 || dimsSize != 1) {
		return fmt.Errorf("%shas different size for dims and reshape", prefix)
	}

	// With wildcards the totals are unknown, so compare the fixed runs
	// between wildcards pairwise: [2,4,-1,6] may become [8,-1,1,6].
	if dimsSize == WildcardDim {
		dimRuns := fixedRuns(t.GetDims())
		reshapeRuns := fixedRuns(reshape.GetShape())
		if len(dimRuns) != len(reshapeRuns) {
			return fmt.Errorf("%shas different number of variable-size dimensions for dims and reshape", prefix)
		}
		for i := range dimRuns {
			if dimRuns[i] != reshapeRuns[i] {
				return fmt.Errorf("%shas different size for dims and reshape", prefix)
			}
		}
	}
	return nil
}

// elementCount follows Triton's convention: -1 when any dimension is a
// wildcard, 0 for an empty shape, else the product.
func elementCount(dims []int64, what string) (int64, error) {
	var count int64
	for i, d := range dims {
		if d == WildcardDim {
			return WildcardDim, nil
		}
		if i == 0 {
			count = d
			continue
		}
		if d != 0 && (count > math.MaxInt64/d || count < math.MinInt64/d) {
			return 0, fmt.Errorf("unable to get element count for %s: product of dimensions overflows int64", what)
		}
		count *= d
	}
	return count, nil
}

// fixedRuns returns the products of the fixed dimensions between
// wildcards (one more entry than there are wildcards). Callers have
// already rejected non-positive fixed dimensions; overflow saturates,
// which can only make two runs compare unequal.
func fixedRuns(dims []int64) []int64 {
	runs := make([]int64, 0, 2)
	cur := int64(1)
	for _, d := range dims {
		if d == WildcardDim {
			runs = append(runs, cur)
			cur = 1
			continue
		}
		if d > 0 && cur > math.MaxInt64/d {
			cur = math.MaxInt64
		} else {
			cur *= d
		}
	}
	return append(runs, cur)
}

func validateBatchIO(cfg *ModelConfig) error {
	inputs := make(map[string]bool, len(cfg.GetInput()))
	for _, in := range cfg.GetInput() {
		inputs[in.GetName()] = true
	}
	outputs := make(map[string]bool, len(cfg.GetOutput()))
	for _, out := range cfg.GetOutput() {
		outputs[out.GetName()] = true
	}

	for _, bi := range cfg.GetBatchInput() {
		if _, known := BatchInput_Kind_name[int32(bi.GetKind())]; !known {
			return fmt.Errorf("unknown batch input kind '%s'", bi.GetKind())
		}
		if n := len(bi.GetSourceInput()); n != 1 {
			return fmt.Errorf("batch input kind '%s' expects 1 source input, got %d", bi.GetKind(), n)
		}
		if dt := bi.GetDataType(); dt != DataType_TYPE_INT32 && dt != DataType_TYPE_FP32 {
			return errors.New("batch input data type must be TYPE_INT32 or TYPE_FP32")
		}
		for _, src := range bi.GetSourceInput() {
			if !inputs[src] {
				return fmt.Errorf("unknown source input name '%s'", src)
			}
		}
		// Triton leaves this to the backend, which reads the first target
		// name; the batcher feeds exactly one tensor under that name.
		if n := len(bi.GetTargetName()); n != 1 {
			return fmt.Errorf("batch input kind '%s' expects 1 target name, got %d", bi.GetKind(), n)
		}
		if target := bi.GetTargetName()[0]; target == "" || inputs[target] {
			return fmt.Errorf("batch input target name '%s' must be non-empty and differ from every input name", target)
		}
	}

	for _, bo := range cfg.GetBatchOutput() {
		if _, known := BatchOutput_Kind_name[int32(bo.GetKind())]; !known {
			return fmt.Errorf("unknown batch output kind '%s'", bo.GetKind())
		}
		if n := len(bo.GetSourceInput()); n != 1 {
			return fmt.Errorf("batch output kind '%s' expects 1 source input, got %d", bo.GetKind(), n)
		}
		for _, src := range bo.GetSourceInput() {
			if !inputs[src] {
				return fmt.Errorf("unknown source input name '%s'", src)
			}
		}
		targets := make(map[string]bool, len(bo.GetTargetName()))
		for _, target := range bo.GetTargetName() {
			if !outputs[target] {
				return fmt.Errorf("unknown target output name '%s'", target)
			}
			if targets[target] {
				return fmt.Errorf("target output name '%s' can only be specified once", target)
			}
			targets[target] = true
		}
	}
	return nil
}
