package sequence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// accBackend is an in-Go stateful backend for sequence batcher tests. Per
// row: acc_out = acc_in + x and y = acc_out, so a sequence's y is the running
// sum of its x. With a variable-shape state (dims [ -1 ]) the state grows by
// one element per request instead: acc_out = append(acc_in, x), y = sum.
// It records every control tensor it is given; with gated set each
// execution waits at gate after announcing its row count on started.
type accBackend struct {
	mu      sync.Mutex
	rows    []int               // rows of each execution, in order
	seen    []map[string][]byte // per execution row: the non-x inputs' bytes
	dropOut bool                // produce no state output
	standby chan struct{}       // non-nil: instances are out of service until it closes
	grow    bool                // the state grows by one element per request
	gated   bool
	started chan int
	gate    chan struct{}
}

func (b *accBackend) Name() string { return "acc" }
func (b *accBackend) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *accBackend) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	inst := core.Concatenated(spec.Config, &accInstance{b: b, batching: spec.Config.GetMaxBatchSize() > 0})
	if b.standby != nil {
		return &standbyInstance{Instance: inst, b: b}, nil
	}
	return inst, nil
}

// standbyInstance is out of service until its backend's standby closes.
type standbyInstance struct {
	core.Instance
	b *accBackend
}

func (i *standbyInstance) Standby() <-chan struct{} {
	select {
	case <-i.b.standby:
		return nil
	default:
		return i.b.standby
	}
}

type accInstance struct {
	b        *accBackend
	batching bool
}

func (i *accInstance) Execute(ctx context.Context, batch *core.ConcatBatch) error {
	byName := map[string]*core.Tensor{}
	for _, t := range batch.Inputs {
		byName[t.Name] = t
	}
	x, acc := byName["x"], byName["acc_in"]
	rows := 1
	if i.batching {
		rows = int(x.Shape[0])
	}
	i.b.mu.Lock()
	i.b.rows = append(i.b.rows, rows)
	for r := range rows {
		m := map[string][]byte{}
		for _, t := range batch.Inputs {
			if t.Name == "x" {
				continue
			}
			if t.DataType == core.TypeBytes {
				elems, _ := core.BytesElements(t.Data)
				m[t.Name] = elems[r]
				continue
			}
			n := len(t.Data) / rows
			m[t.Name] = t.Data[r*n : (r+1)*n]
		}
		i.b.seen = append(i.b.seen, m)
	}
	gated, dropOut := i.b.gated, i.b.dropOut
	i.b.mu.Unlock()
	if gated {
		i.b.started <- rows
		select {
		case <-i.b.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	y := make([]byte, 0, 4*rows)
	var accOut *core.Tensor
	if acc != nil {
		width := len(acc.Data) / 4 / rows
		grow := i.b.grow
		out := make([]byte, 0, len(acc.Data)+4*rows)
		for r := range rows {
			xv := int32(binary.LittleEndian.Uint32(x.Data[4*r:]))
			var sum int32
			row := acc.Data[r*width*4 : (r+1)*width*4]
			for k := 0; k < len(row); k += 4 {
				sum += int32(binary.LittleEndian.Uint32(row[k:]))
			}
			if grow {
				out = append(out, row...)
				out = binary.LittleEndian.AppendUint32(out, uint32(xv))
			} else {
				out = binary.LittleEndian.AppendUint32(out, uint32(sum+xv))
			}
			y = binary.LittleEndian.AppendUint32(y, uint32(sum+xv))
		}
		shape := slices.Clone(acc.Shape)
		if grow {
			shape[len(shape)-1]++
		}
		accOut = &core.Tensor{Name: "acc_out", DataType: core.TypeInt32, Shape: shape, Data: out}
	}
	now := time.Now()
	batch.ComputeStart, batch.InferStart, batch.InferEnd, batch.ComputeEnd = now, now, now, now
	for _, name := range batch.Outputs {
		switch name {
		case "y":
			batch.Results = append(batch.Results, &core.Tensor{Name: "y", DataType: core.TypeInt32, Shape: slices.Clone(x.Shape), Data: y})
		case "acc_out":
			if !dropOut {
				batch.Results = append(batch.Results, accOut)
			}
		}
	}
	return nil
}
func (i *accInstance) Close() error { return nil }

// accServer loads model "m" on the acc backend with the given config body
// and extra model files.
func accServer(t testing.TB, b *accBackend, cfg string, files map[string][]byte) (*core.Server, error) {
	t.Helper()
	root := t.TempDir()
	files = maps2(files, map[string][]byte{"config.pbtxt": []byte("backend: \"acc\"\n" + cfg), "1/.keep": nil})
	for name, data := range files {
		path := filepath.Join(root, "m", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	if b.started == nil {
		b.started, b.gate = make(chan int, 64), make(chan struct{})
	}
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"m"}, StrictReadiness: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		b.mu.Lock()
		b.gated = false
		b.mu.Unlock()
		close(b.gate)
		s.Shutdown(context.Background())
	})
	return s, nil
}

func maps2(a, b map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

const accIO = `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`

const accState = `state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ 1 ] } ]`

// seqReq is a request of one x for sequence id with flags.
func seqReq(id core.Correlation, x int32, batching bool) *core.InferRequest {
	shape := []int64{1}
	if batching {
		shape = []int64{1, 1}
	}
	return &core.InferRequest{ModelName: "m", ModelVersion: core.LatestVersion, Correlation: id, Inputs: []*core.Tensor{
		{Name: "x", DataType: core.TypeInt32, Shape: shape, Data: binary.LittleEndian.AppendUint32(nil, uint32(x))},
	}}
}

func withFlags(c core.Correlation, flags uint32) core.Correlation {
	c.Flags = flags
	return c
}

func yOf(t testing.TB, resp *core.InferResponse) int32 {
	t.Helper()
	if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "y" {
		t.Fatalf("outputs = %+v, want y alone (state outputs never reach the client)", resp.Outputs)
	}
	return int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data))
}

// runSequence sends xs as one sequence (START on the first, END on the
// last) and returns the y of each request.
func runSequence(ctx context.Context, s *core.Server, id core.Correlation, xs []int32, batching bool) ([]int32, error) {
	var ys []int32
	for k, x := range xs {
		var flags uint32
		if k == 0 {
			flags |= core.FlagSequenceStart
		}
		if k == len(xs)-1 {
			flags |= core.FlagSequenceEnd
		}
		resp, err := s.Infer(ctx, seqReq(withFlags(id, flags), x, batching))
		if err != nil {
			return ys, fmt.Errorf("sequence %v request %d: %w", id, k, err)
		}
		ys = append(ys, int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data)))
		if len(resp.Outputs) != 1 {
			return ys, fmt.Errorf("sequence %v request %d: %d outputs, want y alone", id, k, len(resp.Outputs))
		}
	}
	return ys, nil
}

// 64 interleaved sequences, numeric and string ids, over two instances of
// 4 slots each: every sequence sees its own running sum, whatever slot,
// instance or batch its requests ran in (the not-ready rows padding
// direct's batches disturb none); the backlog holds the sequences beyond
// the 8 slots until slots free up.
func TestSequenceInterleavedSequences(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, `max_batch_size: 4
instance_group [ { kind: KIND_CPU count: 2 } ]
`+accIO+`sequence_batching { `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n, length = 64, 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		id := core.Correlation{ID: uint64(1000 + i)}
		if i%2 == 1 {
			id = core.Correlation{StringID: fmt.Sprintf("seq-%d", i), IsString: true}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]int32, length)
			for k := range xs {
				xs[k] = int32(i*100 + k + 1)
			}
			ys, err := runSequence(context.Background(), s, id, xs, true)
			if err != nil {
				errs <- err
				return
			}
			var sum int32
			for k, x := range xs {
				sum += x
				if ys[k] != sum {
					errs <- fmt.Errorf("sequence %v: y = %v, want running sums of %v", id, ys, xs)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := stats(t, s)
	if st.InferenceCount != n*length || st.Success.Count != n*length {
		t.Errorf("inference count %d, success %d, want %d", st.InferenceCount, st.Success.Count, n*length)
	}
	var execs, rows uint64
	for _, bs := range st.Batches {
		if bs.BatchSize < 1 || bs.BatchSize > 4 {
			t.Errorf("execution batch size %d outside [1, 4]", bs.BatchSize)
		}
		execs += bs.ComputeInfer.Count
		rows += bs.BatchSize * bs.ComputeInfer.Count
	}
	// The batch statistics count the rows the backend ran, the not-ready
	// rows of direct's padded batches included (as Triton's backends
	// report them); the inference count only the requests.
	b.mu.Lock()
	ran := 0
	for _, r := range b.rows {
		ran += r
	}
	b.mu.Unlock()
	if execs != st.ExecutionCount || rows != uint64(ran) || rows < n*length {
		t.Errorf("batch stats count %d executions of %d rows, want %d executions of the %d rows run (at least %d)", execs, rows, st.ExecutionCount, ran, n*length)
	}
}

func acquireStats(t *testing.T, s *core.Server) core.StatsSnapshot { return stats(t, s) }

// With the instance busy, the heads of four slots wait, and the next
// execution takes one request from each (never two of one sequence): the
// statistics show the batch of 4.
func TestSequenceSlotBatching(t *testing.T) {
	b := &accBackend{gated: true}
	s, err := accServer(t, b, `max_batch_size: 4
`+oneInstance+accIO+`sequence_batching { `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type res struct {
		y   int32
		err error
	}
	send := func(id uint64, flags uint32, x int32) chan res {
		ch := make(chan res, 1)
		go func() {
			resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: id, Flags: flags}, x, true))
			if err != nil {
				ch <- res{err: err}
				return
			}
			ch <- res{y: yOf(t, resp)}
		}()
		return ch
	}
	a1 := send(1, core.FlagSequenceStart, 1)
	if got := <-b.started; got != 1 {
		t.Fatalf("first execution has %d rows, want 1", got)
	}
	waitPending := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for acquireStats(t, s).Pending != n {
			if time.Now().After(deadline) {
				t.Fatalf("pending = %d, want %d", acquireStats(t, s).Pending, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	a2 := send(1, 0, 10)
	waitPending(1)
	a3 := send(1, core.FlagSequenceEnd, 100)
	waitPending(2)
	others := []chan res{send(2, core.FlagSequenceStart, 2), send(3, core.FlagSequenceStart|core.FlagSequenceEnd, 3), send(4, core.FlagSequenceStart, 4)}
	waitPending(5)
	b.gate <- struct{}{}
	if got := <-b.started; got != 4 {
		t.Fatalf("second execution has %d rows, want 4 (one per slot)", got)
	}
	b.gate <- struct{}{}
	if got := <-b.started; got != 1 {
		t.Fatalf("third execution has %d rows, want 1 (the sequence's next request)", got)
	}
	b.gate <- struct{}{}
	for i, want := range []int32{1, 11, 111} {
		if r := <-[]chan res{a1, a2, a3}[i]; r.err != nil || r.y != want {
			t.Errorf("sequence 1 request %d: y = %d, %v; want %d", i, r.y, r.err, want)
		}
	}
	for i, ch := range others {
		if r := <-ch; r.err != nil || r.y != int32(i+2) {
			t.Errorf("sequence %d: y = %d, %v; want %d", i+2, r.y, r.err, i+2)
		}
	}
	st := acquireStats(t, s)
	var sizes []uint64
	for _, bs := range st.Batches {
		sizes = append(sizes, bs.BatchSize)
	}
	if !slices.Equal(sizes, []uint64{1, 4}) || st.ExecutionCount != 3 || st.InferenceCount != 6 {
		t.Errorf("batch sizes %v, executions %d, inferences %d; want [1 4], 3, 6", sizes, st.ExecutionCount, st.InferenceCount)
	}
}

// Requests the sequence batcher refuses, in Triton's words and codes.
func TestSequenceErrors(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, `max_batch_size: 4
`+oneInstance+accIO+`sequence_batching { control_input [ { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ] `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := runSequence(ctx, s, core.Correlation{ID: 7}, []int32{1, 2}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Infer(ctx, seqReq(core.Correlation{ID: 8, Flags: core.FlagSequenceStart}, 1, true)); err != nil {
		t.Fatal(err)
	}
	two := seqReq(core.Correlation{ID: 8}, 1, true)
	two.Inputs[0].Shape, two.Inputs[0].Data = []int64{2, 1}, make([]byte, 8)
	for _, tc := range []struct {
		name string
		req  *core.InferRequest
		code core.Code
		msg  string
	}{
		{"no correlation id", seqReq(core.Correlation{Flags: core.FlagSequenceStart}, 1, true), core.CodeInvalidArg,
			"inference request to model 'm' must specify a non-zero or non-empty correlation ID"},
		{"no START for an unknown id", seqReq(core.Correlation{ID: 9}, 1, true), core.CodeInvalidArg,
			"inference request for sequence 9 to model 'm' must specify the START flag on the first request of the sequence"},
		{"after the sequence's END", seqReq(core.Correlation{ID: 7}, 1, true), core.CodeInvalidArg,
			"inference request for sequence 7 to model 'm' must specify the START flag on the first request of the sequence"},
		{"string id for a UINT64 CORRID", seqReq(core.Correlation{StringID: "a", IsString: true, Flags: core.FlagSequenceStart}, 1, true), core.CodeInvalidArg,
			"[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'BYTES', but model 'm' expects 'UINT64'"},
		{"batch of two", two, core.CodeInvalidArg,
			"inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Infer(ctx, tc.req)
			if err == nil || err.Error() != tc.msg || core.CodeOf(err) != tc.code || !core.Rejected(err) {
				t.Fatalf("err = %v (%v), want %s %q, rejected", err, core.CodeOf(err), tc.code, tc.msg)
			}
		})
	}
	// The open sequence is unharmed by the refusals.
	resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: 8, Flags: core.FlagSequenceEnd}, 5, true))
	if err != nil || yOf(t, resp) != 6 {
		t.Fatalf("sequence 8 end: %v, %v; want y 6", resp, err)
	}
}

// The control tensors reach the backend as ordinary inputs after the
// config inputs: START, END and READY with their false/true values, CORRID
// as its data type, and the state after them.
func TestSequenceControlInputs(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	for _, tc := range []struct {
		name     string
		batching string
		corrType string
		id       core.Correlation
		corr     []byte
	}{
		{"uint64 id, UINT64, batching", "max_batch_size: 2", "TYPE_UINT64", core.Correlation{ID: 1<<40 + 5}, le64(1<<40 + 5)},
		{"uint64 id, INT32, not batching", "max_batch_size: 0", "TYPE_INT32", core.Correlation{ID: 1<<40 + 5}, le32(5)},
		{"uint64 id, UINT32", "max_batch_size: 2", "TYPE_UINT32", core.Correlation{ID: 77}, le32(77)},
		{"uint64 id, INT64", "max_batch_size: 2", "TYPE_INT64", core.Correlation{ID: 77}, le64(77)},
		{"string id, STRING", "max_batch_size: 2", "TYPE_STRING", core.Correlation{StringID: "abc", IsString: true}, []byte("abc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &accBackend{}
			s, err := accServer(t, b, tc.batching+"\n"+oneInstance+accIO+`sequence_batching {
  control_input [
    { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 5, 6 ] } ] },
    { name: "E" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0.5, 1.5 ] } ] },
    { name: "R" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: `+tc.corrType+` } ] }
  ]
  `+accState+` }`, nil)
			if err != nil {
				t.Fatal(err)
			}
			batching := tc.batching != "max_batch_size: 0"
			ys, err := runSequence(context.Background(), s, tc.id, []int32{3, 4, 5}, batching)
			if err != nil || !slices.Equal(ys, []int32{3, 7, 12}) {
				t.Fatalf("ys = %v, %v; want [3 7 12]", ys, err)
			}
			f32 := func(v float32) []byte { return le32(math.Float32bits(v)) }
			want := []map[string][]byte{
				{"S": le32(6), "E": f32(0.5), "R": {1}, "C": tc.corr, "acc_in": le32(0)},
				{"S": le32(5), "E": f32(0.5), "R": {1}, "C": tc.corr, "acc_in": le32(3)},
				{"S": le32(5), "E": f32(1.5), "R": {1}, "C": tc.corr, "acc_in": le32(7)},
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.seen) != len(want) {
				t.Fatalf("backend saw %d requests, want %d", len(b.seen), len(want))
			}
			for k := range want {
				for name, v := range want[k] {
					if !slices.Equal(b.seen[k][name], v) {
						t.Errorf("request %d: %s = %v, want %v", k, name, b.seen[k][name], v)
					}
				}
			}
		})
	}
}

// A sequence idle for max_sequence_idle_microseconds is ended: its slot
// goes to the sequence waiting in the backlog, a later request for it
// needs a START, and a new START begins from a fresh state.
func TestSequenceIdleTimeout(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, `max_batch_size: 1
`+oneInstance+accIO+`sequence_batching { max_sequence_idle_microseconds: 200000 `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: 1, Flags: core.FlagSequenceStart}, 5, true))
	if err != nil || yOf(t, resp) != 5 {
		t.Fatalf("start: %v, %v", resp, err)
	}
	// The only slot is held by sequence 1: sequence 2 waits in the
	// backlog until the reaper ends sequence 1.
	begin := time.Now()
	resp, err = s.Infer(ctx, seqReq(core.Correlation{ID: 2, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, 7, true))
	if err != nil || yOf(t, resp) != 7 {
		t.Fatalf("backlogged sequence: %v, %v", resp, err)
	}
	if waited := time.Since(begin); waited < 150*time.Millisecond {
		t.Errorf("backlogged sequence ran after %v, before sequence 1 could have been idle for 200ms", waited)
	}
	_, err = s.Infer(ctx, seqReq(core.Correlation{ID: 1}, 1, true))
	want := "inference request for sequence 1 to model 'm' must specify the START flag on the first request of the sequence"
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeInvalidArg {
		t.Fatalf("request after the idle end: %v, want %q", err, want)
	}
	ys, err := runSequence(ctx, s, core.Correlation{ID: 1}, []int32{2, 3}, true)
	if err != nil || !slices.Equal(ys, []int32{2, 5}) {
		t.Fatalf("restarted sequence: %v, %v; want [2 5] (no state from before)", ys, err)
	}
	// With every sequence ended the reaper goes to sleep for good.
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		armed, watched := sequence.Reaping(mv)
		if !armed && watched == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaper still armed (%v) watching %d sequences with none open", armed, watched)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The state starts from initial_state (a data file, or zero_data), a START
// resets it even within an open sequence, and a variable-shape state takes
// the shape the model gave it last.
func TestSequenceImplicitState(t *testing.T) {
	le := func(vs ...int32) []byte {
		var out []byte
		for _, v := range vs {
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		state   string
		files   map[string][]byte
		grow    bool
		flags   []uint32
		xs, ys  []int32
		lastAcc []byte
	}{
		{name: "data file", state: `state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state { name: "init" data_type: TYPE_INT32 dims: [ 1 ] data_file: "acc.bin" } } ]`,
			files: map[string][]byte{"initial_state/acc.bin": le(100)},
			flags: []uint32{core.FlagSequenceStart, 0, core.FlagSequenceStart, core.FlagSequenceEnd},
			xs:    []int32{1, 2, 3, 4}, ys: []int32{101, 103, 103, 107}},
		{name: "zero data", state: `state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state { name: "init" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } ]`,
			flags: []uint32{core.FlagSequenceStart, core.FlagSequenceEnd},
			xs:    []int32{1, 2}, ys: []int32{1, 3}},
		{name: "variable shape", state: `state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ -1 ] } ]`,
			grow:  true,
			flags: []uint32{core.FlagSequenceStart, 0, core.FlagSequenceEnd},
			xs:    []int32{1, 2, 3}, ys: []int32{1, 3, 6}, lastAcc: le(0, 1, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &accBackend{grow: tc.grow}
			s, err := accServer(t, b, "max_batch_size: 2\n"+oneInstance+accIO+"sequence_batching { "+tc.state+" }", tc.files)
			if err != nil {
				t.Fatal(err)
			}
			for k, x := range tc.xs {
				resp, err := s.Infer(context.Background(), seqReq(core.Correlation{ID: 3, Flags: tc.flags[k]}, x, true))
				if err != nil || yOf(t, resp) != tc.ys[k] {
					t.Fatalf("request %d: %v, %v; want y %d", k, resp, err, tc.ys[k])
				}
			}
			if tc.lastAcc != nil {
				b.mu.Lock()
				got := b.seen[len(b.seen)-1]["acc_in"]
				b.mu.Unlock()
				if !slices.Equal(got, tc.lastAcc) {
					t.Errorf("last acc_in = %v, want %v", got, tc.lastAcc)
				}
			}
		})
	}
}

// A model that does not produce a state output fails the request.
func TestSequenceMissingStateOutput(t *testing.T) {
	b := &accBackend{dropOut: true}
	s, err := accServer(t, b, "max_batch_size: 2\n"+oneInstance+accIO+"sequence_batching { "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Infer(context.Background(), seqReq(core.Correlation{ID: 3, Flags: core.FlagSequenceStart}, 1, true))
	want := "model 'm' did not produce the output 'acc_out' of state 'acc_in'"
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeInternal {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// sequence_batching the server refuses at load, in Triton's words.
func TestSequenceConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		files       map[string][]byte
		want        string
	}{
		{"two initial states", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state [ { name: "i" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true }, { name: "j" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } ] } ]`, nil,
			"initial_state field for state input 'a' must contain exactly one or zero element. Found '2' elements."},
		{"initial state type", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state { name: "i" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } ]`, nil,
			"The data type used for 'initial_state' field of state 'a' does not match the state data type."},
		{"initial state name", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } ]`, nil,
			"Field 'name' must be set when using initial_state for state input 'a'."},
		{"initial state rank", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 1 ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ 1, 1 ] zero_data: true } } ]`, nil,
			"Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input 'a'. 2 != 1"},
		{"initial state variable dim", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ -1 ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ -1 ] zero_data: true } } ]`, nil,
			"'initial_state' field for state input name 'a' contains variable dimensions."},
		{"initial state dim", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 2 ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ 3 ] zero_data: true } } ]`, nil,
			"'initial_state' dim for input name 'a' doesn't match 'state' dim description. 3 != 2"},
		{"short data file", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 2 ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ 2 ] data_file: "f" } } ]`, map[string][]byte{"initial_state/f": {1, 2, 3}},
			"initial_state setting expects 8 bytes, but the data provided from fonly has 3 bytes."},
		{"no state data", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 2 ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ 2 ] } } ]`, nil,
			"initial_state setting expects state'a' to have state_data set"},
		{"state input twice", `state [ { input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [ 1 ] },
  { input_name: "a" output_name: "c" data_type: TYPE_INT32 dims: [ 1 ] } ]`, nil,
			"State input name 'a' specified more than once."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := accServer(t, &accBackend{}, "max_batch_size: 2\n"+accIO+"sequence_batching { "+tc.state+" }", tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load: %v, want %q", err, tc.want)
			}
		})
	}
}

// gatedSend runs one request in the background.
type seqResult struct {
	y   int32
	err error
}

func gatedSend(t *testing.T, s *core.Server, id uint64, flags uint32, x int32) chan seqResult {
	ch := make(chan seqResult, 1)
	go func() {
		resp, err := s.Infer(context.Background(), seqReq(core.Correlation{ID: id, Flags: flags}, x, true))
		if err != nil {
			ch <- seqResult{err: err}
			return
		}
		ch <- seqResult{y: int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data))}
	}()
	return ch
}

func waitPending(t *testing.T, s *core.Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for stats(t, s).Pending != n {
		if time.Now().After(deadline) {
			t.Fatalf("pending = %d, want %d", stats(t, s).Pending, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func nextRows(t *testing.T, b *accBackend) int {
	t.Helper()
	select {
	case n := <-b.started:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no execution started")
		return 0
	}
}

// The oldest strategy batches the oldest heads of its candidate
// sequences, at most one request per sequence, and cuts at a preferred
// batch size rather than wait out the queue delay.
func TestSequenceOldestStrategy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		oldest string
		rows   []int
	}{
		{"no delay", `max_candidate_sequences: 4`, []int{1, 3, 1}},
		{"preferred size cuts the batch", `max_candidate_sequences: 4 preferred_batch_size: [ 1, 2 ] max_queue_delay_microseconds: 60000000`, []int{1, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &accBackend{gated: true}
			s, err := accServer(t, b, "max_batch_size: 4\n"+oneInstance+accIO+"sequence_batching { oldest { "+tc.oldest+" } "+accState+" }", nil)
			if err != nil {
				t.Fatal(err)
			}
			a1 := gatedSend(t, s, 1, core.FlagSequenceStart, 1)
			if got := nextRows(t, b); got != 1 {
				t.Fatalf("first execution: %d rows, want 1", got)
			}
			a2 := gatedSend(t, s, 1, 0, 10)
			waitPending(t, s, 1)
			b1 := gatedSend(t, s, 2, core.FlagSequenceStart|core.FlagSequenceEnd, 2)
			waitPending(t, s, 2)
			c1 := gatedSend(t, s, 3, core.FlagSequenceStart|core.FlagSequenceEnd, 3)
			waitPending(t, s, 3)
			a3 := gatedSend(t, s, 1, core.FlagSequenceEnd, 100)
			waitPending(t, s, 4)
			var rows []int
			rows = append(rows, 1)
			for sum := 1; sum < 5; {
				b.gate <- struct{}{}
				n := nextRows(t, b)
				rows = append(rows, n)
				sum += n
			}
			b.gate <- struct{}{}
			if !slices.Equal(rows, tc.rows) {
				t.Errorf("execution rows %v, want %v", rows, tc.rows)
			}
			for i, c := range []struct {
				ch   chan seqResult
				want int32
			}{{a1, 1}, {a2, 11}, {a3, 111}, {b1, 2}, {c1, 3}} {
				if r := <-c.ch; r.err != nil || r.y != c.want {
					t.Errorf("request %d: %d, %v; want %d", i, r.y, r.err, c.want)
				}
			}
		})
	}
}

// Under the direct strategy with a queue delay, a lone request waits for
// the delay unless enough slots are ready (minimum_slot_utilization).
func TestSequenceDirectQueueDelay(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, "max_batch_size: 4\n"+oneInstance+accIO+
		"sequence_batching { direct { max_queue_delay_microseconds: 300000 minimum_slot_utilization: 0.5 } "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	r := <-gatedSend(t, s, 1, core.FlagSequenceStart|core.FlagSequenceEnd, 4)
	if r.err != nil || r.y != 4 {
		t.Fatalf("lone request: %d, %v", r.y, r.err)
	}
	if waited := time.Since(begin); waited < 250*time.Millisecond {
		t.Errorf("lone request ran after %v, before its 300ms queue delay", waited)
	}
}

// A numeric correlation id to a model whose CORRID is a string is refused
// with Triton's text.
func TestSequenceCorridWantsString(t *testing.T) {
	s, err := accServer(t, &accBackend{}, "max_batch_size: 2\n"+oneInstance+accIO+
		`sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := seqReq(core.Correlation{ID: 4, Flags: core.FlagSequenceStart}, 1, true)
	req.ID = "r1"
	_, err = s.Infer(context.Background(), req)
	want := "[request id: r1] sequence batching control 'C' data-type is 'UINT64', but model 'm' expects 'BYTES'"
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeInvalidArg {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// A request whose client goes away while it waits in its slot does not
// run and is answered CANCELLED; the sequence goes on from the state its
// last request that ran left.
func TestSequenceCancelledRequestLeavesSlot(t *testing.T) {
	b := &accBackend{gated: true}
	s, err := accServer(t, b, "max_batch_size: 2\n"+oneInstance+accIO+"sequence_batching { "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	a1 := gatedSend(t, s, 1, core.FlagSequenceStart, 1)
	nextRows(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	a2 := make(chan error, 1)
	go func() {
		_, err := s.Infer(ctx, seqReq(core.Correlation{ID: 1}, 10, true))
		a2 <- err
	}()
	waitPending(t, s, 1)
	cancel()
	a3 := gatedSend(t, s, 1, core.FlagSequenceEnd, 100)
	waitPending(t, s, 2)
	b.gate <- struct{}{}
	if n := nextRows(t, b); n != 1 {
		t.Fatalf("second execution: %d rows, want 1", n)
	}
	b.gate <- struct{}{}
	if r := <-a1; r.err != nil || r.y != 1 {
		t.Errorf("first: %d, %v", r.y, r.err)
	}
	if err := <-a2; core.CodeOf(err) != core.CodeCancelled {
		t.Errorf("cancelled request: %v, want CANCELLED", err)
	}
	if r := <-a3; r.err != nil || r.y != 101 {
		t.Errorf("end: %d, %v; want 101", r.y, r.err)
	}
	if st := stats(t, s); st.ExecutionCount != 2 || st.Failures[core.FailCanceled] != 1 {
		t.Errorf("executions %d, cancelled %d; want 2, 1", st.ExecutionCount, st.Failures[core.FailCanceled])
	}
}

// model_warmup of a sequence model runs a one-request sequence: the
// backend gets the controls and the initial state as for any request.
func TestSequenceWarmup(t *testing.T) {
	b := &accBackend{}
	_, err := accServer(t, b, "max_batch_size: 2\n"+oneInstance+accIO+`sequence_batching {
  control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
  `+accState+` }
model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) != 1 || !slices.Equal(b.seen[0]["S"], []byte{1, 0, 0, 0}) || !slices.Equal(b.seen[0]["acc_in"], []byte{0, 0, 0, 0}) {
		t.Fatalf("warmup inputs %v, want S = 1 and acc_in = 0", b.seen)
	}
}

// A sequence whose request timeout passes while it waits in the backlog
// is refused in Triton's words and counted as rejected; the sequence that
// holds the slot goes on.
func TestSequenceBacklogTimeout(t *testing.T) {
	s, err := accServer(t, &accBackend{}, "max_batch_size: 1\n"+oneInstance+accIO+
		"sequence_batching { max_sequence_idle_microseconds: 60000000 "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Infer(ctx, seqReq(core.Correlation{ID: 1, Flags: core.FlagSequenceStart}, 1, true)); err != nil {
		t.Fatal(err)
	}
	req := seqReq(core.Correlation{ID: 2, Flags: core.FlagSequenceStart}, 2, true)
	req.TimeoutMicros = 100000
	_, err = s.Infer(ctx, req)
	want := "timeout of the corresponding sequence has been expired"
	if err == nil || err.Error() != want || core.CodeOf(err) != core.CodeUnavailable || core.Rejected(err) {
		t.Fatalf("backlogged past its timeout: %v, want %q", err, want)
	}
	if _, err := s.Infer(ctx, seqReq(core.Correlation{ID: 2}, 2, true)); core.CodeOf(err) != core.CodeInvalidArg {
		t.Errorf("request of the refused sequence: %v, want the START error", err)
	}
	resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: 1, Flags: core.FlagSequenceEnd}, 5, true))
	if err != nil || yOf(t, resp) != 6 {
		t.Fatalf("sequence 1 end: %v, %v", resp, err)
	}
	if st := stats(t, s); st.Failures[core.FailRejected] != 1 || st.Pending != 0 {
		t.Errorf("rejected %d, pending %d; want 1, 0", st.Failures[core.FailRejected], st.Pending)
	}
}

// A sequence waits while its instance is out of service (Standby) and
// runs once it is back.
func TestSequenceWaitsForInstanceInStandby(t *testing.T) {
	b := &accBackend{standby: make(chan struct{})}
	s, err := accServer(t, b, "max_batch_size: 2\n"+oneInstance+accIO+"sequence_batching { "+accState+" }", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := gatedSend(t, s, 1, core.FlagSequenceStart|core.FlagSequenceEnd, 9)
	waitPending(t, s, 1)
	time.Sleep(50 * time.Millisecond)
	b.mu.Lock()
	ran := len(b.rows)
	b.mu.Unlock()
	if ran != 0 {
		t.Fatalf("%d executions while the instance was out of service", ran)
	}
	close(b.standby)
	if r := <-ch; r.err != nil || r.y != 9 {
		t.Fatalf("after standby: %d, %v", r.y, r.err)
	}
}

// A slot count the server would exhaust its memory on is refused at load.
func TestSequenceTooManySlots(t *testing.T) {
	_, err := accServer(t, &accBackend{}, "max_batch_size: 4\n"+accIO+"sequence_batching { oldest { max_candidate_sequences: 2000000000 } }", nil)
	if err == nil || !strings.Contains(err.Error(), "needs 2000000000 sequence slots per instance") {
		t.Fatalf("load: %v", err)
	}
}

// TestSequenceRequestedStateOutput: a state output the configuration also
// lists under `output` reaches a client that asks for it (by name, or by
// asking for every output), as Triton's debugging aid does; otherwise it is
// taken out of the response.
func TestSequenceRequestedStateOutput(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "acc_out" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching { `+accState+` }
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		outputs []core.RequestedOutput
		want    []string
	}{
		{"every output", nil, []string{"acc_out", "y"}},
		{"by name", []core.RequestedOutput{{Name: "acc_out"}}, []string{"acc_out"}},
		{"not asked", []core.RequestedOutput{{Name: "y"}}, []string{"y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := seqReq(core.Correlation{ID: 7, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, 5, false)
			req.Outputs = tc.outputs
			resp, err := s.Infer(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range resp.Outputs {
				got = append(got, o.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("outputs %v, want %v", got, tc.want)
			}
		})
	}
}
