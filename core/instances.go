package core

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

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

// InstanceStart is how long one instance of a version took to start: its
// backend's NewInstance, from the call to the instance ready to run (a
// Python worker started and initialized, an ONNX Runtime session opened
// or joined). Instances created at once each count their own wall time.
type InstanceStart struct {
	Instance string
	Duration time.Duration
}

// newInstances creates the instances refs name, all at once where backend
// allows it and serial is false, else one after another, and returns them
// in refs' order with each one's start time. On a failure it closes the
// instances created and returns the first failure in refs' order.
//
// serial is a retune's (Retune): the copy it replaces serves while it
// loads, and instances created at once would take every core from it. An
// ONNX Runtime session spends its start copying weights into fresh pages;
// two at once on two cores held a copy serving 3,000 infer/s back by
// tens to hundreds of milliseconds (BENCHMARKS.md "What a reload costs
// under load").
func newInstances(ctx context.Context, backend Backend, refs []modelconfig.InstanceRef, serial bool, spec func(modelconfig.InstanceRef) InstanceSpec) ([]Instance, []InstanceStart, error) {
	insts := make([]Instance, len(refs))
	starts := make([]InstanceStart, len(refs))
	errs := make([]error, len(refs))
	create := func(i int, ref modelconfig.InstanceRef) {
		t0 := time.Now()
		insts[i], errs[i] = backend.NewInstance(ctx, spec(ref))
		starts[i] = InstanceStart{Instance: ref.Name, Duration: time.Since(t0)}
	}
	if p, ok := backend.(ParallelInstances); ok && p.ParallelInstances() && !serial && len(refs) > 1 {
		var wg sync.WaitGroup
		for i, ref := range refs {
			wg.Go(func() { create(i, ref) })
		}
		wg.Wait()
	} else {
		for i, ref := range refs {
			if create(i, ref); errs[i] != nil {
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
		return nil, nil, err
	}
	return insts, starts, nil
}

// InstanceStarts are the start times of the version's instances, active
// and passive, in the config's order (none for an ensemble). The caller
// must not modify the slice.
func (mv *ModelVersion) InstanceStarts() []InstanceStart { return mv.starts }

// startsText renders the instance start times of a load's versions for the
// "loaded model" line: "m_0=212ms m_1=230ms", each prefixed with "v<n>:"
// when the load has several versions.
func startsText(fresh map[int64]*ModelVersion, versions []int64) string {
	var b strings.Builder
	for _, v := range versions {
		mv := fresh[v]
		if mv == nil {
			continue
		}
		for _, st := range mv.starts {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			if len(versions) > 1 {
				fmt.Fprintf(&b, "v%d:", v)
			}
			fmt.Fprintf(&b, "%s=%s", st.Instance, st.Duration.Round(time.Millisecond/10))
		}
	}
	return b.String()
}
