package ensemble_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

const idInt = `name: "id_int"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
`

// TestEnsembleStreamIsLinear: an ensemble request whose decoupled step
// sends n responses does work and keeps state in proportion to the
// responses in flight, not to those already sent: the bytes allocated per
// response do not grow with n (they grew linearly, every response
// revisiting every earlier one).
func TestEnsembleStreamIsLinear(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
		"id_int": {Config: idInt, ONNX: []byte("id")},
		"stream": servertest.Ensemble(servertest.EnsembleConfig("stream", 0, []string{"IN:TYPE_INT32:[ -1 ]"}, []string{"Y:TYPE_INT32:[ 1 ]", "I:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=r", "IDX=I"}},
			servertest.Step{Model: "id_int", In: []string{"INPUT0=r"}, Out: []string{"OUTPUT0=Y"}})),
	})})
	mv, release, err := s.Acquire("stream", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	perResponse := func(n int) float64 {
		req := servertest.RepeatRequest(n, nil)
		req.ModelName = "stream"
		got := 0
		bytes := servertest.Allocated(func() {
			servertest.Must(t, mv.InferStream(context.Background(), req, func(r *core.InferResponse, _ bool) error {
				if r != nil {
					got++
				}
				return nil
			}))
		})
		if got != n {
			t.Fatalf("%d responses for %d", got, n)
		}
		return float64(bytes) / float64(n)
	}
	perResponse(100) // warm up
	small, large := perResponse(200), perResponse(4000)
	t.Logf("bytes allocated per response: %.0f for 200, %.0f for 4000", small, large)
	if large > 2*small {
		t.Fatalf("bytes allocated per response grow with the stream: %.0f for 200 responses, %.0f for 4000", small, large)
	}
}

// gate is a backend whose instances answer (OUTPUT0 = INPUT0) only once
// open is closed: a slow step, without timing.
type gate struct{ open chan struct{} }

func (gate) Name() string { return "gate" }

func (gate) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}

func (g gate) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, gateInstance(g)), nil
}

type gateInstance gate

func (g gateInstance) Execute(ctx context.Context, b *core.ConcatBatch) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	b.ComputeStart, b.InferStart, b.InferEnd, b.ComputeEnd = now, now, now, now
	b.Results = []*core.Tensor{{Name: "OUTPUT0", DataType: b.Inputs[0].DataType, Shape: b.Inputs[0].Shape, Data: b.Inputs[0].Data}}
	return nil
}

func (gateInstance) Close() error { return nil }

// TestEnsembleStreamLateTensor: a step that reads a decoupled step's
// responses and a tensor from a slow step that is not decoupled fires for
// every response once that tensor arrives, whether it comes before, among
// or after them.
func TestEnsembleStreamLateTensor(t *testing.T) {
	g := gate{open: make(chan struct{})}
	s := servertest.Start(t, servertest.Options{Backends: []core.Backend{g}, Repo: servertest.WriteRepo(t, map[string]servertest.Model{
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
		"slow": {Config: `name: "slow"
backend: "gate"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, ONNX: []byte("gate")},
		"add": {Config: `name: "add"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, 1))},
		"late": servertest.Ensemble(servertest.EnsembleConfig("late", 0, []string{"IN:TYPE_INT32:[ -1 ]", "K:TYPE_INT32:[ 1 ]"}, []string{"Y:TYPE_INT32:[ 1 ]", "I:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=r", "IDX=I"}},
			servertest.Step{Model: "slow", In: []string{"INPUT0=K"}, Out: []string{"OUTPUT0=k"}},
			servertest.Step{Model: "add", In: []string{"INPUT0=r", "INPUT1=k"}, Out: []string{"OUTPUT0=Y"}})),
	})})
	mv, release, err := s.Acquire("late", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	const n = 50
	req := servertest.RepeatRequest(n, nil)
	req.ModelName = "late"
	req.Inputs = append(req.Inputs, servertest.Int32Rows("K", 1, func(int) int32 { return 1000 }))
	req.Inputs[1].Shape = []int64{1}
	req.Inputs[1].Data = req.Inputs[1].Data[:4]
	var got servertest.Streamed
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Most of the stream is in by now, usually; the answer must be the
		// same whatever the order.
		time.Sleep(100 * time.Millisecond)
		close(g.open)
	}()
	servertest.Must(t, mv.InferStream(context.Background(), req, got.Emit))
	wg.Wait()
	if len(got.Resps) != n || got.Finals != 1 {
		t.Fatalf("%d responses, %d finals", len(got.Resps), got.Finals)
	}
	seen := map[int32]int32{}
	for _, r := range got.Resps {
		o := outputs(t, r)
		seen[o["I"][0]] = o["Y"][0]
	}
	for i := range n {
		if seen[int32(i)] != int32(1100+i) {
			t.Fatalf("response %d carries %d", i, seen[int32(i)])
		}
	}
}
