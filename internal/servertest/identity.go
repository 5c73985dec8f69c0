package servertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/fuzzshape"
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

func (identityInstance) Execute(_ context.Context, b *core.ConcatBatch) error {
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

// CheckIdentityAnswer checks what the core made of a fuzzed request to a
// one-input identity model: a refusal must be INVALID_ARG, and an accepted
// input must come back unchanged and hold exactly its shape's bytes
// (BYTES excepted), so no shape whose byte size overflows gets through.
func CheckIdentityAnswer(sent *core.Tensor, resp *core.InferResponse, err error) error {
	if err != nil {
		if code := core.CodeOf(err); code != core.CodeInvalidArg {
			return fmt.Errorf("%v: code %v", err, code)
		}
		return nil
	}
	if len(resp.Outputs) != 1 || !bytes.Equal(resp.Outputs[0].Data, sent.Data) {
		return errors.New("the identity model changed the tensor")
	}
	if dt := sent.DataType; dt != core.TypeBytes && fuzzshape.ExactByteSize(sent.Shape, dt.ByteSize()).Cmp(big.NewInt(int64(len(sent.Data)))) != 0 {
		return fmt.Errorf("accepted %d bytes of %s for shape %v", len(sent.Data), dt, sent.Shape)
	}
	return nil
}
