package onnxrt

import (
	"context"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// AutoComplete fills in what the ONNX file knows and the config lacks, as
// Triton's ONNX Runtime backend does (triton-inference-server/
// onnxruntime_backend src/onnxruntime.cc, AutoCompleteConfig):
// max_batch_size, an empty dynamic_batching block, and inputs/outputs in
// graph declaration order. It
// does nothing when the config already lists inputs (or batch inputs) and
// outputs.
//
// Unlike Triton, it leaves the sequence batcher's control and state
// inputs out of the inputs it adds: Triton lists them, and then its own
// input count (config inputs plus controls plus states) refuses the model.
func (b *Backend) AutoComplete(ctx context.Context, v core.VersionFiles, cfg *modelconfig.ModelConfig) error {
	model := modelName(v, cfg)
	inputs := len(cfg.GetInput()) + len(cfg.GetBatchInput())
	outputs := len(cfg.GetOutput())
	if inputs > 0 && outputs > 0 {
		b.log.Info("skipping model configuration auto-complete: inputs and outputs already specified", "model", model)
		return nil
	}
	path, err := modelPath(v, cfg)
	if err != nil {
		return err
	}
	release, err := b.hold(ctx)
	if err != nil {
		return err
	}
	g, err := b.infos.load(path, cfg)
	release()
	if err != nil {
		return err
	}

	if batchable(g) {
		if cfg.MaxBatchSize == 0 {
			cfg.MaxBatchSize = int32(max(b.opts.DefaultMaxBatchSize, 0))
			b.log.Warn("autofilled max_batch_size since batching is supported but no max_batch_size is specified in model configuration; set max_batch_size to use a larger one",
				"model", model, "max_batch_size", cfg.MaxBatchSize)
		}
		if cfg.MaxBatchSize > 1 && cfg.GetDynamicBatching() == nil && cfg.GetSequenceBatching() == nil {
			cfg.SchedulingChoice = &modelconfig.ModelConfig_DynamicBatching{DynamicBatching: &modelconfig.ModelDynamicBatching{}}
		}
	} else if cfg.MaxBatchSize != 0 {
		return core.Errorf(core.CodeInvalidArg, "autofill failed for model '%s': model does not support batching while non-zero max_batch_size is specified", model)
	}

	if inputs == 0 {
		fed := sequenceFed(cfg)
		for _, io := range g.inputs {
			if fed[io.Name] {
				continue
			}
			dims, reshape := configDims(io, cfg.MaxBatchSize)
			cfg.Input = append(cfg.Input, &modelconfig.ModelInput{
				Name: io.Name, DataType: modelconfig.DataType(fromONNX(io.DataType)), Dims: dims, Reshape: reshape,
			})
		}
	}
	if outputs == 0 {
		for _, io := range g.outputs {
			dims, reshape := configDims(io, cfg.MaxBatchSize)
			cfg.Output = append(cfg.Output, &modelconfig.ModelOutput{
				Name: io.Name, DataType: modelconfig.DataType(fromONNX(io.DataType)), Dims: dims, Reshape: reshape,
			})
		}
	}
	return nil
}

// batchable reports whether every graph input and output has a dynamic
// first dimension, the only way a model can take Triton's batch dimension.
func batchable(g *graphInfo) bool {
	for _, ios := range [][]ort.InputOutputInfo{g.inputs, g.outputs} {
		for _, io := range ios {
			if len(io.Dimensions) == 0 || io.Dimensions[0] != -1 {
				return false
			}
		}
	}
	return true
}

// configDims derives config dims from graph dims: without the batch dim on
// a batching model, and [1] when nothing is left, with an empty reshape on a
// batching model (so the model sees [B]; Triton rejects that reshape
// without batching).
func configDims(io ort.InputOutputInfo, mbs int32) ([]int64, *modelconfig.ModelTensorReshape) {
	dims := []int64(io.Dimensions)
	if mbs > 0 && len(dims) > 0 {
		dims = dims[1:]
	}
	if len(dims) > 0 {
		return append([]int64(nil), dims...), nil
	}
	if mbs > 0 {
		return []int64{1}, &modelconfig.ModelTensorReshape{Shape: []int64{}}
	}
	return []int64{1}, nil
}

// sequenceFed names the graph inputs the sequence batcher feeds: the
// control tensors and the state inputs.
func sequenceFed(cfg *modelconfig.ModelConfig) map[string]bool {
	seq := cfg.GetSequenceBatching()
	fed := map[string]bool{}
	for _, ci := range seq.GetControlInput() {
		fed[ci.GetName()] = true
	}
	for _, st := range seq.GetState() {
		fed[st.GetInputName()] = true
	}
	return fed
}
