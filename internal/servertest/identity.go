package servertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Identity is an in-Go backend named "identity" (as Triton's test backend
// of that name): output OUTPUTn is input INPUTn. Unlike ONNX Runtime it
// accepts any transaction policy, so the API's handling of decoupled
// models can be tested before a backend that streams exists.
type Identity struct{}

// Name implements core.Backend.
func (Identity) Name() string { return "identity" }

// AutoComplete implements core.Backend; the config must be complete.
func (Identity) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

// NewInstance implements core.Backend.
func (Identity) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, identityInstance{}), nil
}

type identityInstance struct{}

func (identityInstance) Execute(_ context.Context, b *core.Batch) error {
	now := time.Now()
	b.ComputeStart, b.InferStart = now, now
	b.Results = make([]*core.Tensor, 0, len(b.Outputs))
	for _, name := range b.Outputs {
		var src *core.Tensor
		for _, in := range b.Inputs {
			if in.Name == strings.Replace(name, "OUTPUT", "INPUT", 1) {
				src = in
			}
		}
		if src == nil {
			return fmt.Errorf("identity: no input for output '%s'", name)
		}
		b.Results = append(b.Results, &core.Tensor{Name: name, DataType: src.DataType, Shape: src.Shape, Data: src.Data})
	}
	b.InferEnd, b.ComputeEnd = time.Now(), time.Now()
	return nil
}

func (identityInstance) Close() error { return nil }
