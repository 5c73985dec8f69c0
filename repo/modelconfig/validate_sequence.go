package modelconfig

import "fmt"

func validateSequenceBatching(cfg *ModelConfig, sb *ModelSequenceBatching) error {
	name := cfg.GetName()
	if cfg.GetResponseCache().GetEnable() {
		//lint:ignore ST1005 Triton's exact wording.
		return fmt.Errorf("Response Cache does not currently support model %s with sequence batching "+
			"scheduler. Please disable the response cache.", name)
	}

	for _, kind := range []ModelSequenceBatching_Control_Kind{
		ModelSequenceBatching_Control_CONTROL_SEQUENCE_START,
		ModelSequenceBatching_Control_CONTROL_SEQUENCE_END,
		ModelSequenceBatching_Control_CONTROL_SEQUENCE_READY,
	} {
		if _, err := BooleanSequenceControl(sb, name, kind); err != nil {
			return err
		}
	}

	corrid, err := TypedSequenceControl(sb, name, ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID)
	if err != nil {
		return err
	}
	if corrid.TensorName != "" {
		switch corrid.DataType {
		case DataType_TYPE_UINT64, DataType_TYPE_INT64, DataType_TYPE_UINT32, DataType_TYPE_INT32, DataType_TYPE_STRING:
		default:
			return fmt.Errorf("unexpected data type for control %s for %s. Allowed data types are "+
				"TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
				ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID, name)
		}
	}

	if oldest := sb.GetOldest(); oldest != nil {
		for _, size := range oldest.GetPreferredBatchSize() {
			if size <= 0 {
				return fmt.Errorf("sequence batching preferred batch size must be positive for %s", name)
			}
			if size > cfg.GetMaxBatchSize() {
				return fmt.Errorf("sequence batching preferred batch size must be <= max batch size for %s", name)
			}
		}
	}

	if direct := sb.GetDirect(); direct != nil {
		if u := direct.GetMinimumSlotUtilization(); u < 0 || u > 1 {
			return fmt.Errorf("sequence batching minimum slot utilization must be in range (0.0, 1.0] for %s", name)
		}
	}
	return nil
}

// SequenceControl describes the tensor that carries one sequence control
// signal. TensorName is empty when the control is not configured.
type SequenceControl struct {
	TensorName string
	// DataType is the tensor type: for boolean controls it follows from
	// which *_false_true list is used (INT32, FP32 or BOOL); for CORRID it
	// is the configured data_type.
	DataType DataType
	// FalseValue and TrueValue hold the two list entries of a boolean
	// control, as float64 (bool lists give 0 and 1).
	FalseValue, TrueValue float64
}

// BooleanSequenceControl finds the START/END/READY control of kind in sb
// and checks it the way Triton does: control tensors need names, a tensor
// serves one control, a kind appears once, and exactly one of the
// *_false_true lists is given, with exactly two entries.
func BooleanSequenceControl(sb *ModelSequenceBatching, modelName string, kind ModelSequenceBatching_Control_Kind) (SequenceControl, error) {
	var found SequenceControl
	err := eachControl(sb, modelName, kind, func(tensor string, c *ModelSequenceBatching_Control) error {
		found.TensorName = tensor
		nInt, nFP, nBool := len(c.GetInt32FalseTrue()), len(c.GetFp32FalseTrue()), len(c.GetBoolFalseTrue())
		given := 0
		for _, n := range []int{nInt, nFP, nBool} {
			if n != 0 {
				given++
			}
		}
		switch {
		case given == 0:
			return fmt.Errorf("sequence batching must specify either 'int32_false_true', "+
				"'fp32_false_true' or 'bool_false_true' for %s for %s", kind, modelName)
		case given > 1:
			return fmt.Errorf("sequence batching specifies more than one from "+
				"'int32_false_true', 'fp32_false_true' and 'bool_false_true' for %s for %s", kind, modelName)
		}

		switch {
		case nInt > 0:
			if nInt != 2 {
				return falseTrueCountError("int32_false_true", kind, modelName)
			}
			found.DataType = DataType_TYPE_INT32
			found.FalseValue, found.TrueValue = float64(c.Int32FalseTrue[0]), float64(c.Int32FalseTrue[1])
		case nFP > 0:
			if nFP != 2 {
				return falseTrueCountError("fp32_false_true", kind, modelName)
			}
			found.DataType = DataType_TYPE_FP32
			found.FalseValue, found.TrueValue = float64(c.Fp32FalseTrue[0]), float64(c.Fp32FalseTrue[1])
		default:
			if nBool != 2 {
				return falseTrueCountError("bool_false_true", kind, modelName)
			}
			found.DataType = DataType_TYPE_BOOL
			found.FalseValue, found.TrueValue = boolToFloat(c.BoolFalseTrue[0]), boolToFloat(c.BoolFalseTrue[1])
		}
		return nil
	})
	if err != nil {
		return SequenceControl{}, err
	}
	return found, nil
}

// TypedSequenceControl finds a control carried by value (CORRID): same
// tensor rules as BooleanSequenceControl, but no *_false_true list may be
// given and the type comes from data_type.
func TypedSequenceControl(sb *ModelSequenceBatching, modelName string, kind ModelSequenceBatching_Control_Kind) (SequenceControl, error) {
	var found SequenceControl
	err := eachControl(sb, modelName, kind, func(tensor string, c *ModelSequenceBatching_Control) error {
		found.TensorName = tensor
		found.DataType = c.GetDataType()
		if len(c.GetInt32FalseTrue()) > 0 || len(c.GetFp32FalseTrue()) > 0 || len(c.GetBoolFalseTrue()) > 0 {
			return fmt.Errorf("sequence batching must not specify either 'int32_false_true', "+
				"'fp32_false_true' or 'bool_false_true' for %s for %s", kind, modelName)
		}
		return nil
	})
	if err != nil {
		return SequenceControl{}, err
	}
	return found, nil
}

// eachControl walks sb's control inputs in order, checking each tensor's
// name (checkControlTensorName), and calls fn for the control of kind,
// which may appear once. The checks run in the order Triton's
// GetBooleanSequenceControlProperties and GetTypedSequenceControlProperties
// run them (triton-inference-server/core src/model_config_utils.cc), so a
// configuration with several faults gets the same first error.
func eachControl(sb *ModelSequenceBatching, modelName string, kind ModelSequenceBatching_Control_Kind, fn func(tensor string, c *ModelSequenceBatching_Control) error) error {
	seenTensors := make(map[string]bool)
	seen := false
	for _, ci := range sb.GetControlInput() {
		if err := checkControlTensorName(ci, modelName, seenTensors); err != nil {
			return err
		}
		for _, c := range ci.GetControl() {
			if c.GetKind() != kind {
				continue
			}
			if seen {
				return fmt.Errorf("sequence batching specifies multiple %s tensors for %s", kind, modelName)
			}
			seen = true
			if err := fn(ci.GetName(), c); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkControlTensorName(ci *ModelSequenceBatching_ControlInput, modelName string, seen map[string]bool) error {
	if ci.GetName() == "" {
		return fmt.Errorf("sequence batching control tensor must have a name for %s", modelName)
	}
	if seen[ci.GetName()] {
		return fmt.Errorf("sequence batching control tensor '%s' is specified for multiple control kinds for %s",
			ci.GetName(), modelName)
	}
	seen[ci.GetName()] = true
	return nil
}

func falseTrueCountError(list string, kind ModelSequenceBatching_Control_Kind, modelName string) error {
	return fmt.Errorf("sequence batching control '%s' must have exactly 2 entries for %s for %s", list, kind, modelName)
}

func boolToFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
