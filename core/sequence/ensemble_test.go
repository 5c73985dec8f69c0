package sequence_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// retag is a backend whose model answers Y = X with response parameters
// that re-key the sequence for the steps after it, as the request's
// "retag" parameter asks: "id" sets sequence_id 1000 + the request's id,
// "id+flags" also sequence_start and sequence_end as the request's flags,
// "float" sets sequence_id to a float, anything else none.
type retag struct{}

func (retag) Name() string { return "retag" }
func (retag) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (retag) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return retag{}, nil
}
func (retag) Close() error { return nil }

func (retag) Execute(_ context.Context, e *core.Execution) error {
	now := time.Now()
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = now, now, now, now
	for _, r := range e.Requests {
		x := r.Inputs[0]
		c := r.Correlation
		params := map[string]any{}
		switch r.Parameters["retag"] {
		case "id+flags":
			params["sequence_start"] = c.Flags&core.FlagSequenceStart != 0
			params["sequence_end"] = c.Flags&core.FlagSequenceEnd != 0
			fallthrough
		case "id":
			params["sequence_id"] = int64(1000 + c.ID)
		case "float":
			params["sequence_id"] = 1.5
		}
		_ = r.Send(&core.ExecResponse{Outputs: []*core.Tensor{{Name: "Y", DataType: x.DataType, Shape: x.Shape, Data: x.Data}}, Parameters: params}, true)
	}
	return nil
}

// An ensemble passes its request's correlation id and flags to every step;
// a step's response parameters sequence_id, sequence_start and
// sequence_end replace them for the steps that read its outputs, and then
// only the flags they name are set (triton-inference-server/core
// src/ensemble_scheduler/ensemble_scheduler.cc, ConsumeResponse and
// InitStep).
func TestSequenceEnsembleCorrelationOverride(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Backends: []core.Backend{retag{}}, Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"retag": {Config: `backend: "retag"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`},
		"acc": {Config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), ONNX: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"retag_acc": servertest.Ensemble(servertest.EnsembleConfig("retag_acc", 8,
			[]string{"IN:TYPE_INT32:[ 1 ]"}, []string{"SUM:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "retag", In: []string{"X=IN"}, Out: []string{"Y=y"}},
			servertest.Step{Model: "acc", In: []string{"INPUT=y"}, Out: []string{"OUTPUT=SUM"}})),
		// an ensemble of the ensemble.
		"outer": servertest.Ensemble(servertest.EnsembleConfig("outer", 8,
			[]string{"IN:TYPE_INT32:[ 1 ]"}, []string{"SUM:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "retag_acc", In: []string{"IN=IN"}, Out: []string{"SUM=SUM"}})),
	})})
	ctx := context.Background()
	infer := func(model, retag string, id uint64, flags uint32, x int32) (int32, error) {
		resp, err := s.Infer(ctx, &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
			Correlation: core.Correlation{ID: id, Flags: flags}, Parameters: map[string]any{"retag": retag},
			Inputs: []*core.Tensor{{Name: map[string]string{"retag_acc": "IN", "outer": "IN", "acc": "INPUT"}[model], DataType: core.TypeInt32, Shape: []int64{1, 1},
				Data: binary.LittleEndian.AppendUint32(nil, uint32(x))}}})
		if err != nil {
			return 0, err
		}
		return int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data)), nil
	}
	const start, end = core.FlagSequenceStart, core.FlagSequenceEnd
	for _, tc := range []struct {
		name         string
		model, retag string
		id           uint64
		flags        uint32
		x            int32
		want         int32
		err          string
	}{
		// No override: the ensemble's id and flags reach acc.
		{"passed through", "retag_acc", "", 7, start, 1, 1, ""},
		{"passed through, next", "retag_acc", "", 7, 0, 2, 3, ""},
		// Re-keyed to 1007 with the flags: a sequence of its own.
		{"re-keyed start", "retag_acc", "id+flags", 7, start, 10, 10, ""},
		{"re-keyed next", "retag_acc", "id+flags", 7, 0, 20, 30, ""},
		// acc's sequence 1007 is the re-keyed one.
		{"the re-keyed sequence, directly", "acc", "", 1007, 0, 5, 35, ""},
		// An id alone carries no flags: START is not passed on.
		{"an id alone drops START", "retag_acc", "id", 8, start | end, 1, 0,
			"in ensemble 'retag_acc', inference request for sequence 1008 to model 'acc' must specify the START flag on the first request of the sequence"},
		{"through the outer ensemble", "outer", "", 7, 0, 3, 6, ""},
		{"ends both", "retag_acc", "", 7, end, 4, 10, ""},
		{"ends the re-keyed one", "retag_acc", "id+flags", 7, end, 1, 36, ""},
		{"a float id", "retag_acc", "float", 9, start, 1, 0,
			"in ensemble 'retag_acc', expected parameter 'sequence_id' to be TRITONSERVER_PARAMETER_INT or TRITONSERVER_PARAMETER_STRING"},
	} {
		got, err := infer(tc.model, tc.retag, tc.id, tc.flags, tc.x)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err || core.CodeOf(err) != core.CodeInvalidArg {
				t.Fatalf("%s: %v, want INVALID_ARG %q", tc.name, err, tc.err)
			}
		case err != nil || got != tc.want:
			t.Fatalf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := infer("acc", "", 1007, 0, 1); err == nil || !strings.Contains(err.Error(), "must specify the START flag") {
		t.Fatalf("sequence 1007 after its END: %v, want it ended", err)
	}
}

// Sequenced says which models take part in sequences: a model with
// sequence batching and an ensemble with such a step, at any depth.
func TestSequencedModels(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
		"acc":    {Config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), ONNX: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))},
		"ens": servertest.Ensemble(servertest.EnsembleConfig("ens", 8, []string{"IN:TYPE_INT32:[ 1 ]"}, []string{"OUT:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "acc", In: []string{"INPUT=IN"}, Out: []string{"OUTPUT=OUT"}})),
		"outer": servertest.Ensemble(servertest.EnsembleConfig("outer", 8, []string{"IN:TYPE_INT32:[ 1 ]"}, []string{"OUT:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "ens", In: []string{"IN=IN"}, Out: []string{"OUT=OUT"}})),
	})})
	for model, want := range map[string]bool{"simple": false, "chain": false, "acc": true, "ens": true, "outer": true} {
		mv, release, err := s.Acquire(model, core.LatestVersion)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if got := mv.Sequenced(); got != want {
			t.Errorf("%s: Sequenced() = %v, want %v", model, got, want)
		}
		release()
	}
}
