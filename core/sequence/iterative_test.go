package sequence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo/modelconfig"
)

// iterBackend is an iterative sequence model, as in
// triton-inference-server/python_backend's README ("Request
// Rescheduling"): a request asks for N responses; each execution sends
// one, the number still to come, and reschedules the request until that
// is 0. The count left lives in the implicit state, set from N at START.
// It skips the not-ready rows of direct's padded batches.
type iterBackend struct {
	mu   sync.Mutex
	runs []iterRun
}

// iterRun is one request in one execution, as the model saw it.
type iterRun struct {
	id    uint64
	start bool
	left  int32 // after this execution
	rows  int   // requests in the execution
}

func (b *iterBackend) Name() string { return "iter" }
func (b *iterBackend) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *iterBackend) NewInstance(context.Context, core.InstanceSpec) (core.Instance, error) {
	return &iterInstance{b: b}, nil
}

type iterInstance struct{ b *iterBackend }

func (i *iterInstance) Close() error { return nil }

func (i *iterInstance) Execute(_ context.Context, e *core.Execution) error {
	now := time.Now()
	e.ComputeStart, e.InferStart, e.InferEnd, e.ComputeEnd = now, now, now, now
	le32 := func(t *core.Tensor) int32 { return int32(binary.LittleEndian.Uint32(t.Data)) }
	for _, r := range e.Requests {
		in := map[string]*core.Tensor{}
		for _, t := range r.Inputs {
			in[t.Name] = t
		}
		if le32(in["R"]) == 0 {
			continue // a not-ready row padding a direct batch
		}
		start := le32(in["S"]) == 1
		left := le32(in["left_in"])
		if start {
			left = le32(in["N"])
		}
		left--
		i.b.mu.Lock()
		i.b.runs = append(i.b.runs, iterRun{id: r.Correlation.ID, start: start, left: left, rows: len(e.Requests)})
		i.b.mu.Unlock()
		shape := in["N"].Shape
		outs := []*core.Tensor{
			{Name: "OUT", DataType: core.TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(left))},
			{Name: "left_out", DataType: core.TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(left))},
		}
		if left <= 0 {
			_ = r.Send(&core.ExecResponse{Outputs: outs}, true)
			continue
		}
		if err := r.Reschedule(); err != nil {
			_ = r.Send(&core.ExecResponse{Err: err}, true)
			continue
		}
		_ = r.Send(&core.ExecResponse{Outputs: outs}, false)
	}
	return nil
}

// iterServer serves model "m" on b with configuration cfg.
func iterServer(t *testing.T, b core.Backend, cfg string) *core.Server {
	t.Helper()
	repos := testRepo(t, map[string]string{"m": cfg})
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"m"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func iterConfig(maxBatch int, seq string) string {
	return fmt.Sprintf(`backend: "iter"
max_batch_size: %d
input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
instance_group [ { kind: KIND_CPU count: 1 } ]
sequence_batching {
  %s
  control_input [
    { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "R" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
  state [ { input_name: "left_in" output_name: "left_out" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
`, maxBatch, seq)
}

// iterate sends one request asking for n responses, with no correlation
// id, and returns the OUT of each response.
func iterate(ctx context.Context, s *core.Server, n int32, batching bool) ([]int32, error) {
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		return nil, err
	}
	defer release()
	shape := []int64{1}
	if batching {
		shape = []int64{1, 1}
	}
	var outs []int32
	err = mv.InferStream(ctx, &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
		{Name: "N", DataType: core.TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(n))},
	}}, func(resp *core.InferResponse, _ bool) error {
		if resp != nil {
			if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "OUT" {
				return fmt.Errorf("outputs %+v, want OUT alone", resp.Outputs)
			}
			outs = append(outs, int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data)))
		}
		return nil
	})
	return outs, err
}

// iterative_sequence, as Triton's IterativeSequencer
// (triton-inference-server/core src/sequence_batch_scheduler/sequence_utils.h):
// a request without a correlation id gets one of its own and START; a
// request the model reschedules runs again in a later execution, in its
// slot, without START and with the state it left; once it is released
// without rescheduling its sequence ends and the slot goes to the next.
// With one slot, the second request waits for the first's last iteration;
// with two, their iterations share executions.
func TestSequenceIterative(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
	}{
		{"one slot", 0},
		{"two slots", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &iterBackend{}
			s := iterServer(t, b, iterConfig(tc.maxBatch, "iterative_sequence: true"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			counts := []int32{3, 4, 2}
			got := make([][]int32, len(counts))
			errs := make([]error, len(counts))
			var wg sync.WaitGroup
			for k, n := range counts {
				wg.Go(func() { got[k], errs[k] = iterate(ctx, s, n, tc.maxBatch > 0) })
			}
			wg.Wait()
			for k, n := range counts {
				var want []int32
				for left := n - 1; left >= 0; left-- {
					want = append(want, left)
				}
				if errs[k] != nil || !slices.Equal(got[k], want) {
					t.Errorf("request %d asking for %d: %v, %v; want %v", k, n, got[k], errs[k], want)
				}
			}
			b.mu.Lock()
			runs := slices.Clone(b.runs)
			b.mu.Unlock()
			// Each request ran n times under one id of its own, START
			// only the first time.
			byID := map[uint64][]iterRun{}
			shared := false
			for _, r := range runs {
				byID[r.id] = append(byID[r.id], r)
				shared = shared || r.rows > 1
			}
			if len(byID) != len(counts) || byID[0] != nil {
				t.Fatalf("runs by correlation id %v, want %d distinct non-zero ids", byID, len(counts))
			}
			for id, rs := range byID {
				for k, r := range rs {
					if r.start != (k == 0) || (k > 0 && r.left != rs[k-1].left-1) {
						t.Errorf("sequence %d run %d: %+v after %+v", id, k, r, rs[max(0, k-1)])
					}
				}
			}
			if tc.maxBatch == 0 && shared {
				t.Errorf("runs %+v: an execution of a model without batching held several requests", runs)
			}
			mv, release, err := s.Acquire("m", core.LatestVersion)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if n := sequence.LiveSequences(mv); n != 0 {
				t.Errorf("%d sequences live once every request ended, want 0", n)
			}
		})
	}
}

// A model without iterative_sequence that reschedules a request gets
// Triton's error, and the request ends with it.
func TestSequenceRescheduleNotIterative(t *testing.T) {
	s := iterServer(t, &iterBackend{}, iterConfig(0, ""))
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	err = mv.InferStream(context.Background(), &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion,
		Correlation: core.Correlation{ID: 1, Flags: core.FlagSequenceStart}, Inputs: []*core.Tensor{
			{Name: "N", DataType: core.TypeInt32, Shape: []int64{1}, Data: binary.LittleEndian.AppendUint32(nil, 2)},
		}}, nil)
	const want = "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag."
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeInvalidArg {
		t.Fatalf("err = %v (%v), want INVALID_ARG %q", err, core.CodeOf(err), want)
	}
}
