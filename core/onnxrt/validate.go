package onnxrt

import (
	"slices"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// validate checks a configuration against the ONNX graph when an instance
// loads, with Triton's messages (triton-inference-server/onnxruntime_backend
// src/onnxruntime.cc, ValidateInputs and ValidateOutputs).
func validate(model string, cfg *modelconfig.ModelConfig, g *graphInfo) error {
	mbs := int(cfg.GetMaxBatchSize())
	controls, err := validateSequenceControls(model, cfg, g)
	if err != nil {
		return err
	}
	if want := expectedInputs(cfg, controls); want != len(g.inputs) {
		return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', configuration expects %d inputs, model provides %d", model, want, len(g.inputs))
	}
	for _, in := range cfg.GetInput() {
		if in.GetOptional() && mbs != 0 {
			return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', optional input '%s' is not supported for models that support batching", model, in.GetName())
		}
		info := g.input(in.GetName())
		if info == nil {
			return unexpected("input", in.GetName(), g.inputs)
		}
		if err := checkType(model, "input", in.GetName(), configType(in.GetDataType()), info); err != nil {
			return err
		}
		dims := in.GetDims()
		if in.GetReshape() != nil {
			dims = in.GetReshape().GetShape()
		}
		if in.GetOptional() && in.GetAllowRaggedBatch() {
			return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', configuration expects model provides input with shape [-1] for ragged input '%s', which is not supported for optional input", model, in.GetName())
		}
		if in.GetAllowRaggedBatch() {
			if len(info.Dimensions) != 1 || info.Dimensions[0] != -1 {
				return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', configuration expects model provides input with shape [-1]  for ragged input '%s', model provides %s", model, in.GetName(), core.ShapeString(info.Dimensions))
			}
			continue
		}
		if err := checkDims(model, in.GetName(), info.Dimensions, dims, mbs, false); err != nil {
			return err
		}
	}
	// Triton's backend counts the state inputs but leaves their names and
	// types to fail at the first run; checked here, they fail the load.
	for _, st := range cfg.GetSequenceBatching().GetState() {
		info := g.input(st.GetInputName())
		if info == nil {
			return unexpected("input", st.GetInputName(), g.inputs)
		}
		if err := checkType(model, "input state", st.GetInputName(), configType(st.GetDataType()), info); err != nil {
			return err
		}
	}
	batchOutputs := map[string]bool{}
	for _, bo := range cfg.GetBatchOutput() {
		for _, t := range bo.GetTargetName() {
			batchOutputs[t] = true
		}
	}
	for _, out := range cfg.GetOutput() {
		info := g.output(out.GetName())
		if info == nil {
			return unexpected("output", out.GetName(), g.outputs)
		}
		if err := checkType(model, "output", out.GetName(), configType(out.GetDataType()), info); err != nil {
			return err
		}
		if batchOutputs[out.GetName()] {
			continue // a batch output's shape need not match the model's
		}
		dims := out.GetDims()
		if out.GetReshape() != nil {
			dims = out.GetReshape().GetShape()
		}
		if err := checkDims(model, out.GetName(), info.Dimensions, dims, mbs, true); err != nil {
			return err
		}
	}
	for _, st := range cfg.GetSequenceBatching().GetState() {
		info := g.output(st.GetOutputName())
		if info == nil {
			return unexpected("output", st.GetOutputName(), g.outputs)
		}
		if err := checkType(model, "output state", st.GetOutputName(), configType(st.GetDataType()), info); err != nil {
			return err
		}
	}
	return nil
}

// expectedInputs is the graph input count a config implies: its inputs less
// the optional ones, plus batch inputs, the sequence control tensors found
// and the states.
func expectedInputs(cfg *modelconfig.ModelConfig, controls int) int {
	n := len(cfg.GetBatchInput()) + controls + len(cfg.GetSequenceBatching().GetState())
	for _, in := range cfg.GetInput() {
		if !in.GetOptional() {
			n++
		}
	}
	return n
}

// sequenceControlKinds are the controls in the order Triton's backend
// checks them.
var sequenceControlKinds = []modelconfig.ModelSequenceBatching_Control_Kind{
	modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_START,
	modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_END,
	modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_READY,
	modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID,
}

// validateSequenceControls checks that each configured sequence control
// tensor is a graph input of shape [1] (after the batch dim) and of the
// type its control implies (ValidateBooleanSequenceControl and
// ValidateTypedSequenceControl). It returns how many controls there are.
func validateSequenceControls(model string, cfg *modelconfig.ModelConfig, g *graphInfo) (int, error) {
	seq := cfg.GetSequenceBatching()
	if seq == nil {
		return 0, nil
	}
	start := 0
	if cfg.GetMaxBatchSize() > 0 {
		start = 1
	}
	n := 0
	for _, kind := range sequenceControlKinds {
		var (
			c   modelconfig.SequenceControl
			err error
		)
		if kind == modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID {
			c, err = modelconfig.TypedSequenceControl(seq, model, kind)
		} else {
			c, err = modelconfig.BooleanSequenceControl(seq, model, kind)
		}
		if err != nil {
			return 0, core.Errorf(core.CodeInvalidArg, "%v", err)
		}
		if c.TensorName == "" {
			continue
		}
		n++
		info := g.input(c.TensorName)
		if info == nil {
			return 0, core.Errorf(core.CodeInternal, "configuration specified sequence control '%s', but model does not provide that input", c.TensorName)
		}
		var dims []int64
		if len(info.Dimensions) > start {
			dims = info.Dimensions[start:]
		}
		if len(dims) != 1 || dims[0] != 1 {
			return 0, core.Errorf(core.CodeInvalidArg, "unable to load model '%s', sequence control '%s' in model has dims %s but dims [1] is expected", model, c.TensorName, core.ShapeString(dims))
		}
		want := configType(c.DataType)
		if toONNX(want) != info.DataType {
			return 0, core.Errorf(core.CodeInvalidArg, "unable to load model '%s', sequence control '%s', the model expects data-type %s but the model configuration specifies data-type %s", model, c.TensorName, onnxTypeName(info.DataType), configName(want))
		}
	}
	return n, nil
}

func checkType(model, what, name string, want core.DataType, info *ort.InputOutputInfo) error {
	if toONNX(want) == ort.TensorElementDataTypeUndefined {
		return core.Errorf(core.CodeInternal, "unsupported datatype %s for %s '%s' for model '%s'", configName(want), what, name, model)
	}
	if toONNX(want) != info.DataType {
		return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', configuration expects datatype %s for %s '%s', model provides %s", model, configName(want), what, name, configName(fromONNX(info.DataType)))
	}
	return nil
}

// checkDims is Triton's CompareDimsSupported: a batching model needs a
// dynamic first dim; then ranks must agree, and each config dim must equal
// the model's where the model's is fixed (inputs) or everywhere (outputs,
// exact). A scalar model tensor takes only 1s in the config.
func checkDims(model, name string, modelDims, dims []int64, mbs int, exact bool) error {
	if len(modelDims) == 0 {
		for _, d := range dims {
			if d != 1 {
				return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', scalar tensor '%s', should only provide 1 in the model configuration when the model doesn't support batching. Model configuration provided: %s.", model, name, core.ShapeString(dims))
			}
		}
		return nil
	}
	full := dims
	if mbs > 0 {
		if modelDims[0] != -1 {
			return core.Errorf(core.CodeInvalidArg, "model '%s', tensor '%s': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is %s", model, name, core.ShapeString(modelDims))
		}
		full = append([]int64{-1}, dims...)
	}
	ok := len(modelDims) == len(full)
	for i := 0; ok && i < len(full); i++ {
		if exact || modelDims[i] != -1 {
			ok = modelDims[i] == full[i]
		}
	}
	if ok {
		return nil
	}
	if mbs > 0 {
		return core.Errorf(core.CodeInvalidArg, "model '%s', tensor '%s': the model expects %d dimensions (shape %s) but the model configuration specifies %d dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape %s)", model, name, len(modelDims), core.ShapeString(modelDims), len(full), core.ShapeString(full))
	}
	return core.Errorf(core.CodeInvalidArg, "model '%s', tensor '%s': the model expects %d dimensions (shape %s) but the model configuration specifies %d dimensions (shape %s)", model, name, len(modelDims), core.ShapeString(modelDims), len(dims), core.ShapeString(dims))
}

// unexpected is Triton's CheckAllowedModelInput/Output message.
func unexpected(what, name string, ios []ort.InputOutputInfo) error {
	names := make([]string, len(ios))
	for i, io := range ios {
		names[i] = io.Name
	}
	slices.Sort(names)
	return core.Errorf(core.CodeInvalidArg, "unexpected inference %s '%s', allowed %ss are: %s", what, name, what, strings.Join(names, ", "))
}

// onnxTypeName is Triton's OnnxDataTypeName (FLOAT, INT32, ...).
func onnxTypeName(t ort.TensorElementDataType) string {
	return strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_")
}
