package ensemble_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

var (
	// chain: (a+b, a-b) then their sum and difference: (2a, 2b).
	chainSteps = []servertest.Step{
		{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=sum", "OUTPUT1=diff"}},
		{Model: "simple", In: []string{"INPUT0=sum", "INPUT1=diff"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}},
	}
)

func outputs(t *testing.T, resp *core.InferResponse) map[string][]int32 {
	t.Helper()
	got := map[string][]int32{}
	for _, o := range resp.Outputs {
		for i := 0; i+4 <= len(o.Data); i += 4 {
			got[o.Name] = append(got[o.Name], int32(binary.LittleEndian.Uint32(o.Data[i:])))
		}
	}
	return got
}

func TestEnsembleExecution(t *testing.T) {
	models := map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
		// fan-out, fan-in: a+b and b-a in parallel, then their sum and
		// difference: (2b, 2a).
		"fan": servertest.Ensemble(servertest.EnsembleConfig("fan", 8, servertest.SimpleInputs, []string{"OUT0:TYPE_INT32:[ 16 ]", "OUT1:TYPE_INT32:[ 16 ]"},
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=apb"}},
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN1", "INPUT1=IN0"}, Out: []string{"OUTPUT1=bma"}},
			servertest.Step{Model: "simple", In: []string{"INPUT0=apb", "INPUT1=bma"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}})),
		// an ensemble of ensembles: chain twice gives (4a, 4b).
		"outer": servertest.Twice("outer", "chain"),
		// BYTES between two identity steps.
		"id_bytes": servertest.IDBytes("id_bytes"),
		"bytes2":   servertest.BytesChain("bytes2", "id_bytes"),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	a := func(i int) int32 { return int32(i) }
	b := func(int) int32 { return 3 }
	for _, tc := range []struct {
		model      string
		want0, mul int32
		swap       bool
	}{{"chain", 0, 2, false}, {"fan", 0, 2, true}, {"outer", 0, 4, false}} {
		resp, err := s.Infer(context.Background(), &core.InferRequest{ModelName: tc.model, ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{servertest.Int32Rows("IN0", 2, a), servertest.Int32Rows("IN1", 2, b)}})
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		got := outputs(t, resp)
		for i := range 32 {
			w0, w1 := tc.mul*int32(i%16), tc.mul*3
			if tc.swap {
				w0, w1 = w1, w0
			}
			if got["OUT0"][i] != w0 || got["OUT1"][i] != w1 {
				t.Fatalf("%s [%d]: got %d %d, want %d %d", tc.model, i, got["OUT0"][i], got["OUT1"][i], w0, w1)
			}
		}
		if !slices.Equal(resp.Outputs[0].Shape, []int64{2, 16}) || resp.ModelName != tc.model {
			t.Fatalf("%s: %+v", tc.model, resp.Outputs[0])
		}
	}
	var text []byte
	for _, w := range []string{"héllo", "", "world"} {
		text = binary.LittleEndian.AppendUint32(text, uint32(len(w)))
		text = append(text, w...)
	}
	resp, err := s.Infer(context.Background(), &core.InferRequest{ModelName: "bytes2", ModelVersion: core.LatestVersion,
		Inputs: []*core.Tensor{{Name: "TEXT", DataType: core.TypeBytes, Shape: []int64{3}, Data: text}}})
	if err != nil || string(resp.Outputs[0].Data) != string(text) {
		t.Fatalf("bytes2: %v %+v", err, resp)
	}
	// Statistics: the ensemble counts its request, each composing model
	// its own (chain ran simple twice per request, outer four times).
	mv, release, err := s.Acquire("outer", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	if st := mv.Stats.Snapshot(); st.Success.Count != 1 || st.InferenceCount != 2 || st.ExecutionCount != 1 {
		t.Fatalf("outer statistics: %d successes, %d inferences, %d executions", st.Success.Count, st.InferenceCount, st.ExecutionCount)
	}
	simple, release2, err := s.Acquire("simple", core.LatestVersion)
	servertest.Must(t, err)
	defer release2()
	// chain: 2 steps, fan: 3, outer: 2 chains of 2, all of batch 2.
	if st := simple.Stats.Snapshot(); st.Success.Count != 2+3+4 || st.InferenceCount != 2*(2+3+4) {
		t.Fatalf("simple statistics: %d successes, %d inferences", st.Success.Count, st.InferenceCount)
	}
}

// TestEnsembleStepFailure: a step that fails in execution fails the
// ensemble request with the step's message; the next request succeeds.
func TestEnsembleStepFailure(t *testing.T) {
	const varIO = `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
`
	models := map[string]servertest.Model{
		"addsub": {Config: "name: \"addsub\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 0\n" + varIO, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1))},
		"pipe": servertest.Ensemble(servertest.EnsembleConfig("pipe", 0, []string{"A:TYPE_INT32:[ -1 ]", "B:TYPE_INT32:[ -1 ]"}, []string{"S:TYPE_INT32:[ -1 ]"},
			servertest.Step{Model: "addsub", In: []string{"INPUT0=A", "INPUT1=B"}, Out: []string{"OUTPUT0=S"}})),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	vec := func(name string, n int) *core.Tensor {
		return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: []int64{int64(n)}, Data: make([]byte, 4*n)}
	}
	_, direct := s.Infer(context.Background(), &core.InferRequest{ModelName: "addsub", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{vec("INPUT0", 3), vec("INPUT1", 4)}})
	_, err := s.Infer(context.Background(), &core.InferRequest{ModelName: "pipe", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{vec("A", 3), vec("B", 4)}})
	if direct == nil || err == nil || err.Error() != "in ensemble 'pipe', "+direct.Error() || core.CodeOf(err) != core.CodeOf(direct) {
		t.Fatalf("failing step: ensemble %v, model alone %v", err, direct)
	}
	if _, err := s.Infer(context.Background(), &core.InferRequest{ModelName: "pipe", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{vec("A", 4), vec("B", 4)}}); err != nil {
		t.Fatal(err)
	}
	mv, release, err := s.Acquire("pipe", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	if st := mv.Stats.Snapshot(); st.Success.Count != 1 || st.Fail.Count != 1 {
		t.Fatalf("pipe statistics: %d successes, %d failures", st.Success.Count, st.Fail.Count)
	}
}

// TestEnsembleValidation loads each ensemble in explicit mode, which
// loads its composing models first, and checks the refusal.
func TestEnsembleValidation(t *testing.T) {
	out16 := []string{"OUT0:TYPE_INT32:[ 16 ]", "OUT1:TYPE_INT32:[ 16 ]"}
	good := chainSteps
	models := map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"ok":     servertest.Ensemble(servertest.EnsembleConfig("ok", 8, servertest.SimpleInputs, out16, good...)),
		"no_input": servertest.Ensemble(servertest.EnsembleConfig("no_input", 8, servertest.SimpleInputs, out16,
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1", "NOPE=IN1"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}})),
		"unmapped": servertest.Ensemble(servertest.EnsembleConfig("unmapped", 8, []string{"IN0:TYPE_INT32:[ 16 ]"}, out16,
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN0"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}})),
		"no_output": servertest.Ensemble(servertest.EnsembleConfig("no_output", 8, servertest.SimpleInputs, out16,
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT9=OUT1"}})),
		"dtype": servertest.Ensemble(servertest.EnsembleConfig("dtype", 8, []string{"IN0:TYPE_FP32:[ 16 ]", "IN1:TYPE_INT32:[ 16 ]"}, out16, good...)),
		"shape": servertest.Ensemble(servertest.EnsembleConfig("shape", 8, []string{"IN0:TYPE_INT32:[ 15 ]", "IN1:TYPE_INT32:[ 16 ]"}, out16, good...)),
		"batch": servertest.Ensemble(servertest.EnsembleConfig("batch", 16, servertest.SimpleInputs, out16, good...)),
		"missing": servertest.Ensemble(servertest.EnsembleConfig("missing", 8, servertest.SimpleInputs, out16,
			servertest.Step{Model: "absent", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=OUT0", "OUTPUT1=OUT1"}})),
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
		"add1": {Config: `name: "add1"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, 1))},
		"two_streams": servertest.Ensemble(servertest.EnsembleConfig("two_streams", 0, []string{"IN:TYPE_INT32:[ -1 ]"}, []string{"S:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=a"}},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=b"}},
			servertest.Step{Model: "add1", In: []string{"INPUT0=a", "INPUT1=b"}, Out: []string{"OUTPUT0=S"}})),
		"loop_a": servertest.Ensemble(servertest.EnsembleConfig("loop_a", 8, servertest.SimpleInputs, out16,
			servertest.Step{Model: "loop_b", In: []string{"IN0=IN0", "IN1=IN1"}, Out: []string{"OUT0=OUT0", "OUT1=OUT1"}})),
		"loop_b": servertest.Ensemble(servertest.EnsembleConfig("loop_b", 8, servertest.SimpleInputs, out16,
			servertest.Step{Model: "loop_a", In: []string{"IN0=IN0", "IN1=IN1"}, Out: []string{"OUT0=OUT0", "OUT1=OUT1"}})),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models), Mode: core.ModeExplicit})
	for _, tc := range []struct{ model, want string }{
		{"ok", ""},
		{"no_input", "in ensemble no_input, ensemble tensor IN1 is mapping to non-existing input NOPE in model simple"},
		{"unmapped", "in ensemble unmapped, input INPUT1 in model simple is not mapped to any ensemble tensors"},
		{"no_output", "in ensemble no_output, ensemble tensor OUT1 is mapped from non-existing output OUTPUT9 in model simple"},
		{"dtype", "in ensemble dtype, ensemble tensor IN0: inconsistent data type: TYPE_FP32 is inferred from model dtype while TYPE_INT32 is inferred from model simple"},
		{"shape", "in ensemble shape, ensemble tensor IN0: inconsistent shape: [-1,15] is inferred from model shape while [-1,16] is inferred from model simple"},
		{"batch", "ensemble batch allows maximum batch size 16, but it contains model simple which only allows maximum batch size to be 8"},
		{"missing", "ensemble missing contains models that are not available or ambiguous: absent"},
		{"loop_a", "circular dependency between ensembles: loop_a -> loop_b -> loop_a"},
		{"two_streams", "in ensemble two_streams, step of model 'add1' receives inputs originated from different decoupled models"},
	} {
		err := s.Load(context.Background(), tc.model, nil)
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.model, err)
			}
			if !s.ModelReady("simple", core.LatestVersion) {
				t.Fatal("loading an ensemble did not load its composing model")
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want %q", tc.model, err, tc.want)
		}
		if s.ModelReady(tc.model, core.LatestVersion) {
			t.Fatalf("%s is ready", tc.model)
		}
	}
}

// TestEnsembleUnload: unloading a composing model takes the ensembles that
// use it along (as Triton); unload_dependents takes along the composing
// models loaded only for the ensemble, not those loaded for themselves.
func TestEnsembleUnload(t *testing.T) {
	models := map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models), Mode: core.ModeExplicit})
	ctx := context.Background()
	ready := func() string {
		var got []string
		for _, n := range []string{"simple", "chain"} {
			if s.ModelReady(n, core.LatestVersion) {
				got = append(got, n)
			}
		}
		return strings.Join(got, ",")
	}
	servertest.Must(t, s.Load(ctx, "chain", nil))
	if got := ready(); got != "simple,chain" {
		t.Fatalf("after loading chain: %s", got)
	}
	servertest.Must(t, s.Unload(ctx, "simple"))
	if got := ready(); got != "" {
		t.Fatalf("after unloading simple: %q ready", got)
	}
	// As in Triton, the ensemble comes back with its composing model.
	servertest.Must(t, s.Load(ctx, "simple", nil))
	if got := ready(); got != "simple,chain" {
		t.Fatalf("after loading simple again: %q ready", got)
	}
	servertest.Must(t, s.Unload(ctx, "simple"))
	servertest.Must(t, s.Load(ctx, "chain", nil))
	servertest.Must(t, s.UnloadDependents(ctx, "chain", true))
	if got := ready(); got != "" {
		t.Fatalf("unload_dependents of chain left %q", got)
	}
	servertest.Must(t, s.Load(ctx, "simple", nil))
	servertest.Must(t, s.Load(ctx, "chain", nil))
	servertest.Must(t, s.UnloadDependents(ctx, "chain", true))
	if got := ready(); got != "simple" {
		t.Fatalf("unload_dependents took an explicitly loaded model: %q ready", got)
	}
}

// TestEnsembleComposingReload reloads the composing model (a config
// override always reloads) while requests run through the ensemble:
// none fails, as each step takes the version serving at that moment.
func TestEnsembleComposingReload(t *testing.T) {
	models := map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failures, done atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := s.Infer(context.Background(), &core.InferRequest{ModelName: "chain", ModelVersion: core.LatestVersion,
					Inputs: []*core.Tensor{servertest.Int32Rows("IN0", 1, func(i int) int32 { return int32(i) }), servertest.Int32Rows("IN1", 1, func(int) int32 { return 1 })}})
				if err != nil {
					failures.Add(1)
					t.Error(err)
				}
				done.Add(1)
			}
		}()
	}
	for i := range 5 {
		// Each reload begins after another request went through, so that
		// requests overlap every one however slow the machine.
		for n := done.Load(); done.Load() == n && failures.Load() == 0; {
			time.Sleep(time.Millisecond)
		}
		cfg := `{"backend":"onnxruntime","max_batch_size":8,"parameters":{"n":{"string_value":"` + strconv.Itoa(i) + `"}}}`
		servertest.Must(t, s.Load(context.Background(), "simple", &core.LoadOverride{ConfigJSON: cfg}))
	}
	cancel()
	wg.Wait()
	if failures.Load() != 0 || done.Load() < 5 {
		t.Fatalf("%d of %d requests failed across 5 reloads", failures.Load(), done.Load())
	}
}

// TestEnsembleDecoupled: a step on a decoupled model makes the ensemble
// decoupled; each of its responses flows through the next step and
// becomes one ensemble response, then a final flag (0, 1 and 50).
func TestEnsembleDecoupled(t *testing.T) {
	models := map[string]servertest.Model{
		"repeat": {Config: servertest.RepeatConfig, ONNX: []byte("repeat")},
		"id_int": {Config: `name: "id_int"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Int32, 1))},
		"stream": servertest.Ensemble(servertest.EnsembleConfig("stream", 0, []string{"IN:TYPE_INT32:[ -1 ]"}, []string{"Y:TYPE_INT32:[ 1 ]", "I:TYPE_INT32:[ 1 ]"},
			servertest.Step{Model: "repeat", In: []string{"IN=IN"}, Out: []string{"OUT=r", "IDX=I"}},
			servertest.Step{Model: "id_int", In: []string{"INPUT0=r"}, Out: []string{"OUTPUT0=Y"}})),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	mv, release, err := s.Acquire("stream", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	if !mv.Config.GetModelTransactionPolicy().GetDecoupled() {
		t.Fatal("an ensemble with a decoupled step is not decoupled")
	}
	for _, n := range []int{0, 1, 50} {
		req := servertest.RepeatRequest(n, nil)
		req.ModelName = "stream"
		var got servertest.Streamed
		if err := mv.InferStream(context.Background(), req, got.Emit); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got.Resps) != n || got.Finals != 1 {
			t.Fatalf("n=%d: %d responses, %d finals", n, len(got.Resps), got.Finals)
		}
		seen := map[int32]int32{}
		for _, r := range got.Resps {
			o := outputs(t, r)
			seen[o["I"][0]] = o["Y"][0]
		}
		for i := range n {
			if seen[int32(i)] != int32(100+i) {
				t.Fatalf("n=%d: response %d carries %d", n, i, seen[int32(i)])
			}
		}
	}
}

// TestEnsembleMixedBatches: concurrent requests to an ensemble and
// straight to its composing model share the composing model's dynamic
// batches, and every one gets its own rows back.
func TestEnsembleMixedBatches(t *testing.T) {
	simple := servertest.Simple("simple")
	simple.Config += "dynamic_batching { max_queue_delay_microseconds: 5000 }\n"
	models := map[string]servertest.Model{
		"simple": simple,
		"chain":  servertest.Chain("chain"),
	}
	s := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	var wg sync.WaitGroup
	for k := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := func(i int) int32 { return int32(k*100 + i) }
			b := func(int) int32 { return int32(k) }
			model := "simple"
			in0, in1 := "INPUT0", "INPUT1"
			if k%2 == 0 {
				model, in0, in1 = "chain", "IN0", "IN1"
			}
			resp, err := s.Infer(context.Background(), &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
				Inputs: []*core.Tensor{servertest.Int32Rows(in0, 1, a), servertest.Int32Rows(in1, 1, b)}})
			if err != nil {
				t.Error(err)
				return
			}
			got := outputs(t, resp)
			for i := range 16 {
				w0, w1 := a(i)+b(i), a(i)-b(i)
				o0, o1 := got["OUTPUT0"], got["OUTPUT1"]
				if model == "chain" {
					w0, w1 = 2*a(i), 2*b(i)
					o0, o1 = got["OUT0"], got["OUT1"]
				}
				if o0[i] != w0 || o1[i] != w1 {
					t.Errorf("%s request %d [%d]: %d %d, want %d %d", model, k, i, o0[i], o1[i], w0, w1)
					return
				}
			}
		}()
	}
	wg.Wait()
	mv, release, err := s.Acquire("simple", core.LatestVersion)
	servertest.Must(t, err)
	defer release()
	st := mv.Stats.Snapshot()
	if st.InferenceCount != 8+16 || st.ExecutionCount >= st.InferenceCount {
		t.Fatalf("simple ran %d requests in %d executions: no batch mixed them", st.InferenceCount, st.ExecutionCount)
	}
}

// TestEnsembleInheritsLabels: classification through an ensemble uses the
// labels of the composing output mapped to the ensemble's output.
func TestEnsembleInheritsLabels(t *testing.T) {
	models := map[string]servertest.Model{
		"scores": {Config: `name: "scores"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
`, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4))},
		"classify": servertest.Ensemble(servertest.EnsembleConfig("classify", 8, []string{"X:TYPE_FP32:[ 4 ]"}, []string{"P:TYPE_FP32:[ 4 ]"},
			servertest.Step{Model: "scores", In: []string{"INPUT0=X"}, Out: []string{"OUTPUT0=P"}})),
	}
	root := servertest.WriteRepo(t, models)
	servertest.Must(t, os.WriteFile(filepath.Join(root, "scores", "labels.txt"), []byte("cat\ndog\nbird\nfish\n"), 0o644))
	s := servertest.Start(t, servertest.Options{Repo: root})
	x := make([]byte, 0, 16)
	for _, v := range []float32{0.1, 0.7, 0.2, 0} {
		x = binary.LittleEndian.AppendUint32(x, math.Float32bits(v))
	}
	resp, err := s.Infer(context.Background(), &core.InferRequest{ModelName: "classify", ModelVersion: core.LatestVersion,
		Inputs:  []*core.Tensor{{Name: "X", DataType: core.TypeFP32, Shape: []int64{1, 4}, Data: x}},
		Outputs: []core.RequestedOutput{{Name: "P", ClassCount: 1}}})
	servertest.Must(t, err)
	elems, err := core.BytesElements(resp.Outputs[0].Data)
	if err != nil || len(elems) != 1 || string(elems[0]) != "0.700000:1:dog" {
		t.Fatalf("classification through the ensemble: %q %v", elems, err)
	}
}
