package python_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

func int32s(name string, shape []int64, vals ...int32) *core.Tensor {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return &core.Tensor{Name: name, DataType: core.TypeInt32, Shape: shape, Data: b}
}

func int32Values(t *core.Tensor) []int32 {
	out := make([]int32, len(t.Data)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out
}

// sequenceID is the i-th test sequence's correlation id: even ones are
// numbers (one above 2^53, which a float64 would change), odd ones strings.
func sequenceID(i int) core.Correlation {
	if i%2 == 1 {
		return core.Correlation{StringID: fmt.Sprintf("seq-%d", i), IsString: true}
	}
	return core.Correlation{ID: 1<<53 + 1 + uint64(i)}
}

// flagsAt are the START and END flags of step k of n.
func flagsAt(k, n int) uint32 {
	var f uint32
	if k == 0 {
		f |= core.FlagSequenceStart
	}
	if k == n-1 {
		f |= core.FlagSequenceEnd
	}
	return f
}

// TestSequenceAccumulator: a model.py that keeps each sequence's running
// sum in its own memory, keyed by request.correlation_id() and reset at
// request.flags()' START, as Triton users write them, serves interleaved
// sequences with number and string ids through the sequence batcher: each
// sequence's requests reach it in order, with their own id and flags, and
// all in the same one of its three worker processes.
func TestSequenceAccumulator(t *testing.T) {
	e := start(t, options{}, "seq_accumulate")
	const sequences, steps = 8, 6
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			corr := sequenceID(i)
			var sum, pid int32
			for k := range steps {
				x := int32(100*i + k + 1)
				sum += x
				c := corr
				c.Flags = flagsAt(k, steps)
				resp, err := e.infer(&core.InferRequest{ModelName: "seq_accumulate", Correlation: c, Inputs: []*core.Tensor{int32s("INPUT", []int64{1, 1}, x)}})
				if err != nil {
					t.Errorf("sequence %d step %d: %v", i, k, err)
					return
				}
				if got := int32Values(output(resp, "OUTPUT")); !slices.Equal(got, []int32{sum}) {
					t.Errorf("sequence %d step %d: OUTPUT %v, want [%d]", i, k, got, sum)
					return
				}
				if p := int32Values(output(resp, "PID"))[0]; k == 0 {
					pid = p
				} else if p != pid {
					t.Errorf("sequence %d step %d ran in worker %d, its earlier steps in %d", i, k, p, pid)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Every sequence ended: the model holds none but the one now running.
	resp, err := e.infer(&core.InferRequest{ModelName: "seq_accumulate", Correlation: core.Correlation{ID: 1, Flags: core.FlagSequenceStart},
		Inputs: []*core.Tensor{int32s("INPUT", []int64{1, 1}, 4)}})
	servertest.Must(t, err)
	if got := int32Values(output(resp, "OPEN")); !slices.Equal(got, []int32{1}) {
		t.Fatalf("after every sequence ended the model holds %v sequences, want [1]", got)
	}
}

// TestSequenceControlInputs: the control inputs of sequence_batching
// reach model.py as inputs after the configured one, in control_input
// order, with the values the configuration gives (START int32 10/11, END
// fp32 0.5/1.5, READY bool) and CORRID the sequence's id, a UINT64 or a
// STRING as configured; shaped [1, 1] for a batching model, [1] otherwise.
func TestSequenceControlInputs(t *testing.T) {
	e := start(t, options{}, "seq_controls", "seq_controls_str", "seq_controls_nobatch")
	for _, c := range []struct {
		model, idType string
		corr          core.Correlation
		id            any
		shape         []int64
	}{
		{"seq_controls", "uint64", core.Correlation{ID: 1<<64 - 1}, json.Number("18446744073709551615"), []int64{1, 1}},
		{"seq_controls_str", "object", core.Correlation{StringID: "seq-a", IsString: true}, "seq-a", []int64{1, 1}},
		{"seq_controls_nobatch", "uint64", core.Correlation{ID: 3}, json.Number("3"), []int64{1}},
	} {
		for k, want := range []struct {
			start, end string
		}{{"11", "0.5"}, {"10", "0.5"}, {"10", "1.5"}} {
			corr := c.corr
			corr.Flags = flagsAt(k, 3)
			resp, err := e.infer(&core.InferRequest{ModelName: c.model, Correlation: corr, Inputs: []*core.Tensor{int32s("INPUT", c.shape, int32(k))}})
			if err != nil {
				t.Fatalf("%s step %d: %v", c.model, k, err)
			}
			var s struct {
				Inputs []struct {
					Name, Datatype string
					Shape          []int64
					Values         []any
				}
				Flags uint32
			}
			dec := json.NewDecoder(strings.NewReader(strings1(t, output(resp, "SEEN"))[0]))
			dec.UseNumber()
			servertest.Must(t, dec.Decode(&s))
			var names []string
			for _, in := range s.Inputs {
				names = append(names, in.Name+":"+in.Datatype+":"+fmt.Sprint(in.Shape, in.Values))
			}
			wantNames := []string{
				"INPUT:int32:" + fmt.Sprint(c.shape, []any{json.Number(fmt.Sprint(k))}),
				"START:int32:" + fmt.Sprint(c.shape, []any{json.Number(want.start)}),
				"END:float32:" + fmt.Sprint(c.shape, []any{json.Number(want.end)}),
				"READY:bool:" + fmt.Sprint(c.shape, []any{true}),
				"CORRID:" + c.idType + ":" + fmt.Sprint(c.shape, []any{c.id}),
			}
			if !slices.Equal(names, wantNames) || s.Flags != corr.Flags {
				t.Fatalf("%s step %d: the model saw\n%q, flags %d; want\n%q, flags %d", c.model, k, names, s.Flags, wantNames, corr.Flags)
			}
		}
	}
}

// TestSequenceImplicitState: a model.py that keeps nothing itself reads
// the sequence's state as the input INPUT_STATE and returns the next one
// as the output OUTPUT_STATE; the server carries it from request to
// request of each sequence, growing (dims -1), and the client never sees
// it; decoupled, the state comes in a response of the model's sender.
// Triton's python_backend has no implicit state
// (triton-inference-server/server docs/user_guide/implicit_state_management.md
// names the backends that do); inferd's sequence batcher hands it to any
// backend as tensors.
func TestSequenceImplicitState(t *testing.T) {
	e := start(t, options{}, "seq_state", "seq_state_decoupled")
	const sequences, steps = 4, 5
	var wg sync.WaitGroup
	for i := range 2 * sequences {
		model := "seq_state"
		if i >= sequences {
			model = "seq_state_decoupled"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			corr := sequenceID(i)
			var history []int32
			for k := range steps {
				x := int32(10*i + k)
				history = append(history, x)
				c := corr
				c.Flags = flagsAt(k, steps)
				resp, err := e.infer(&core.InferRequest{ModelName: model, Correlation: c, Inputs: []*core.Tensor{int32s("INPUT", []int64{1, 1}, x)}})
				if err != nil {
					t.Errorf("%s sequence %d step %d: %v", model, i, k, err)
					return
				}
				out := output(resp, "OUTPUT")
				if out == nil || !slices.Equal(int32Values(out), history) || !slices.Equal(out.Shape, []int64{1, int64(len(history))}) {
					t.Errorf("%s sequence %d step %d: OUTPUT %v, want %v", model, i, k, out, history)
					return
				}
				if len(resp.Outputs) != 1 {
					t.Errorf("%s sequence %d step %d: the client got %d outputs, want OUTPUT alone (the state stays in the server)", model, i, k, len(resp.Outputs))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestBLSSequence: a model.py calls a sequence model through BLS with
// pb_utils.InferenceRequest(correlation_id=..., flags=...) (triton-
// inference-server/python_backend README.md, "Using BLS with Stateful
// Models"): interleaved sequences, with number and string ids, reach the
// called model in order with their ids and flags, and a sequence that does
// not begin with START is refused with Triton's error.
func TestBLSSequence(t *testing.T) {
	e := start(t, options{}, "bls_seq", "seq_accumulate")
	call := func(corr string, flags, x int32) (*core.InferResponse, error) {
		return e.infer(&core.InferRequest{ModelName: "bls_seq", Inputs: []*core.Tensor{
			bytesTensor("CORR", corr), int32s("FLAGS", []int64{1}, flags), int32s("INPUT", []int64{1}, x)}})
	}
	const sequences, steps = 4, 4
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			corr := fmt.Sprint(1<<53 + 1 + i)
			if i%2 == 1 {
				corr = fmt.Sprintf("bls-%d", i)
			}
			var sum int32
			for k := range steps {
				x := int32(7*i + k)
				sum += x
				resp, err := call(corr, int32(flagsAt(k, steps)), x)
				if err != nil {
					t.Errorf("sequence %s step %d: %v", corr, k, err)
					return
				}
				if got := int32Values(output(resp, "OUTPUT")); !slices.Equal(got, []int32{sum}) {
					t.Errorf("sequence %s step %d: OUTPUT %v, want [%d]", corr, k, got, sum)
					return
				}
			}
		}()
	}
	wg.Wait()
	_, err := call("77", 0, 1)
	const want = "Model seq_accumulate - Error when running inference: inference request for sequence 77 to model 'seq_accumulate' must specify the START flag on the first request of the sequence"
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeInternal {
		t.Fatalf("a sequence without START: %v (code %v), want %q (INTERNAL, as Triton's BLS words a refused request)", err, core.CodeOf(err), want)
	}
}

// TestSequencePyOrdering: Triton's own sequence model.py (server
// qa/python_models/sequence_py, as qa/L0_sequence_batcher's
// SequenceBatcherPreserveOrderingTest runs it, oldest strategy, decoupled
// and not) counts each of many interleaved sequences 1, 2, 3: each
// request reaches it with its sequence's id and flags, on the instance
// holding the sequence's count, and a decoupled model's three responses
// and final flag come back for each.
func TestSequencePyOrdering(t *testing.T) {
	e := start(t, options{}, "sequence_py", "sequence_py_decoupled")
	for _, model := range []string{"sequence_py", "sequence_py_decoupled"} {
		mv, release, err := e.srv.Acquire(model, core.LatestVersion)
		servertest.Must(t, err)
		decoupled := model == "sequence_py_decoupled"
		const sequences, steps = 10, 3
		var wg sync.WaitGroup
		for i := range sequences {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range steps {
					req := &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion, ID: fmt.Sprint(i, "-", k),
						Correlation: core.Correlation{ID: uint64(i + 1), Flags: flagsAt(k, steps)},
						Inputs:      []*core.Tensor{int32s("INPUT0", []int64{1, 1}, 1)}}
					var got []int32
					var err error
					finals := 0
					if decoupled {
						err = mv.InferStream(context.Background(), req, func(r *core.InferResponse, final bool) error {
							if r != nil {
								got = append(got, int32Values(output(r, "OUTPUT0"))...)
							}
							if final {
								finals++
							}
							return nil
						})
					} else {
						var resp *core.InferResponse
						resp, err = mv.Infer(context.Background(), req)
						if err == nil {
							got, finals = int32Values(output(resp, "OUTPUT0")), 1
						}
					}
					want := []int32{int32(k + 1)}
					if decoupled {
						want = []int32{int32(k + 1), int32(k + 1), int32(k + 1)}
					}
					if err != nil || !slices.Equal(got, want) || finals != 1 {
						t.Errorf("%s sequence %d step %d: %v, final %d, %v; want %v", model, i+1, k, got, finals, err, want)
						return
					}
				}
			}()
		}
		wg.Wait()
		release()
	}
}

// TestSequenceLargeState: a state of hundreds of KiB, which goes through
// the worker's shared arena both ways rather than the socket, reaches each
// sequence's next request whole, while other sequences' executions reuse
// the arena in between.
func TestSequenceLargeState(t *testing.T) {
	e := start(t, options{}, "seq_big_state")
	const sequences, steps, size = 3, 4, 100_000
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			corr := sequenceID(i)
			var sum float32
			for k := range steps {
				x := float32(i*10 + k + 1)
				sum += x
				c := corr
				c.Flags = flagsAt(k, steps)
				resp, err := e.infer(&core.InferRequest{ModelName: "seq_big_state", Correlation: c,
					Inputs: []*core.Tensor{fp32("INPUT", []int64{1, 1}, x), int32s("SIZE", []int64{1, 1}, size)}})
				if err != nil {
					t.Errorf("sequence %d step %d: %v", i, k, err)
					return
				}
				if got := floats(output(resp, "OUTPUT")); !slices.Equal(got, []float32{sum, size}) {
					t.Errorf("sequence %d step %d: OUTPUT %v, want [%v %v]", i, k, got, sum, size)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSequenceStateOutlivesWorker: implicit state is the server's, so a
// sequence goes on where it was when its worker dies and a new one takes
// its place; the request that ended the worker fails and leaves the state
// as it was.
func TestSequenceStateOutlivesWorker(t *testing.T) {
	e := start(t, options{}, "seq_state")
	step := func(x int32, flags uint32) (*core.InferResponse, error) {
		return e.infer(&core.InferRequest{ModelName: "seq_state", Correlation: core.Correlation{ID: 5, Flags: flags},
			Inputs: []*core.Tensor{int32s("INPUT", []int64{1, 1}, x)}})
	}
	if _, err := step(3, core.FlagSequenceStart); err != nil {
		t.Fatal(err)
	}
	if _, err := step(-1, 0); err == nil || !strings.Contains(err.Error(), "Stub process 'seq_state_0_0' is not healthy.") {
		t.Fatalf("the request that ended the worker: %v", err)
	}
	resp, err := step(4, core.FlagSequenceEnd)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if got := int32Values(output(resp, "OUTPUT")); !slices.Equal(got, []int32{3, 4}) {
		t.Fatalf("after the restart the state was %v, want [3 4]", got)
	}
}

// TestBLSDecoupledSequence: exec(decoupled=True) into a decoupled sequence
// model carries the correlation id and flags too; every response of each
// step comes back in order.
func TestBLSDecoupledSequence(t *testing.T) {
	e := start(t, options{}, "bls_seq_stream", "sequence_py_decoupled")
	for _, corr := range []string{"12", "stream-a"} {
		for k := range 3 {
			resp, err := e.infer(&core.InferRequest{ModelName: "bls_seq_stream", Inputs: []*core.Tensor{
				bytesTensor("CORR", corr), int32s("FLAGS", []int64{1}, int32(flagsAt(k, 3)))}})
			if err != nil {
				t.Fatalf("sequence %s step %d: %v", corr, k, err)
			}
			want := []int32{int32(k + 1), int32(k + 1), int32(k + 1)}
			if got := int32Values(output(resp, "OUTPUT")); !slices.Equal(got, want) {
				t.Fatalf("sequence %s step %d: %v, want %v", corr, k, got, want)
			}
		}
	}
}

// TestSequenceIterative: a decoupled model.py with iterative_sequence
// reschedules each request (request.set_release_flags with
// TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) until it has sent the N
// responses asked for: concurrent requests without a correlation id each
// get their own (the model sees it), their state carries the count from
// one execution to the next, and every request ends with its last
// response; in the default mode, the one response comes from the last
// execution. Without iterative_sequence the reschedule fails the request,
// as does a response returned for a rescheduled request, in Triton's
// words.
func TestSequenceIterative(t *testing.T) {
	e := start(t, options{}, "seq_iterative", "seq_iterative_off", "seq_iterative_default")
	run := func(model string, c core.Correlation, n int32) (outs []int32, corr uint64, err error) {
		mv, release, err := e.srv.Acquire(model, core.LatestVersion)
		if err != nil {
			return nil, 0, err
		}
		defer release()
		err = mv.InferStream(context.Background(), &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion, Correlation: c,
			Inputs: []*core.Tensor{int32s("N", []int64{1, 1}, n)}}, func(r *core.InferResponse, _ bool) error {
			if r == nil {
				return nil
			}
			c := binary.LittleEndian.Uint64(output(r, "CORR").Data)
			if corr != 0 && c != corr {
				return fmt.Errorf("correlation id %d after %d", c, corr)
			}
			corr = c
			outs = append(outs, int32Values(output(r, "OUT"))...)
			return nil
		})
		return outs, corr, err
	}
	counts := []int32{3, 5, 1, 4, 2, 6}
	corrs := make([]uint64, len(counts))
	var wg sync.WaitGroup
	for k, n := range counts {
		wg.Go(func() {
			outs, corr, err := run("seq_iterative", core.Correlation{}, n)
			var want []int32
			for left := n - 1; left >= 0; left-- {
				want = append(want, left)
			}
			if err != nil || !slices.Equal(outs, want) || corr == 0 {
				t.Errorf("request %d asking for %d: %v (correlation id %d), %v; want %v under a non-zero id", k, n, outs, corr, err, want)
			}
			corrs[k] = corr
		})
	}
	wg.Wait()
	slices.Sort(corrs)
	if len(slices.Compact(corrs)) != len(counts) {
		t.Errorf("correlation ids %v, want one per request", corrs)
	}
	// In the default mode only the last execution answers.
	if outs, corr, err := run("seq_iterative_default", core.Correlation{}, 3); err != nil || !slices.Equal(outs, []int32{0}) || corr == 0 {
		t.Errorf("default mode: %v (correlation id %d), %v; want [0] under a non-zero id", outs, corr, err)
	}
	for _, tc := range []struct {
		name, model string
		c           core.Correlation
		n           int32
		want        string
	}{
		{"without iterative_sequence", "seq_iterative_off", core.Correlation{ID: 1, Flags: core.FlagSequenceStart}, 2,
			"Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag."},
		{"a response for a rescheduled request", "seq_iterative_default", core.Correlation{}, -2,
			"Expected a None object in the execute function return list for reschduled request, found type '"},
	} {
		if _, _, err := run(tc.model, tc.c, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
