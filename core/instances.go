package core

import (
	"context"
	"sync"

	"github.com/inferd/inferd/repo/modelconfig"
)

// ParallelInstances is implemented by a Backend whose NewInstance may run
// concurrently for the instances of one model version, as a Triton backend
// declares with TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading
// (triton-inference-server/core src/backend_model.cc; the onnxruntime and
// python backends set it). Instances of different models are created
// concurrently whatever the backend says.
type ParallelInstances interface {
	ParallelInstances() bool
}

// newInstances creates the instances refs name, all at once where backend
// allows it, else one after another, and returns them in refs' order. On a
// failure it closes the instances created and returns the first failure
// in refs' order.
func newInstances(ctx context.Context, backend Backend, refs []modelconfig.InstanceRef, spec func(modelconfig.InstanceRef) InstanceSpec) ([]Instance, error) {
	insts := make([]Instance, len(refs))
	errs := make([]error, len(refs))
	if p, ok := backend.(ParallelInstances); ok && p.ParallelInstances() && len(refs) > 1 {
		var wg sync.WaitGroup
		for i, ref := range refs {
			wg.Go(func() { insts[i], errs[i] = backend.NewInstance(ctx, spec(ref)) })
		}
		wg.Wait()
	} else {
		for i, ref := range refs {
			if insts[i], errs[i] = backend.NewInstance(ctx, spec(ref)); errs[i] != nil {
				break
			}
		}
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, inst := range insts {
			if inst != nil {
				_ = inst.Close()
			}
		}
		return nil, err
	}
	return insts, nil
}
