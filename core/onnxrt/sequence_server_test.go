package onnxrt_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// The stateful onnxbuild models served by a real core.Server, through its
// sequence batcher and ONNX Runtime.

// seqRequest is one request of sequence id to model, with INPUT x.
func seqRequest(t testing.TB, model string, id core.Correlation, flags uint32, elem ob.DataType, shape []int64, x float64) *core.InferRequest {
	t.Helper()
	data, err := ob.Encode(elem, []float64{x})
	if err != nil {
		t.Fatal(err)
	}
	id.Flags = flags
	return &core.InferRequest{
		ModelName: model, ModelVersion: core.LatestVersion, Correlation: id,
		Inputs: []*core.Tensor{{Name: "INPUT", DataType: dataType(elem), Shape: shape, Data: data}},
	}
}

// dataType is the core type of an onnxbuild element type.
func dataType(e ob.DataType) core.DataType {
	switch e {
	case ob.Int32:
		return core.TypeInt32
	case ob.Int64:
		return core.TypeInt64
	case ob.Float:
		return core.TypeFP32
	case ob.Double:
		return core.TypeFP64
	case ob.Uint64:
		return core.TypeUint64
	case ob.Bool:
		return core.TypeBool
	case ob.Float16:
		return core.TypeFP16
	case ob.String:
		return core.TypeBytes
	}
	panic(fmt.Sprintf("no core type for %v", e))
}

// flagsAt are the sequence flags of request k of n.
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

// output finds a response output by name and decodes it.
func output(resp *core.InferResponse, name string, elem ob.DataType) (*core.Tensor, []float64, error) {
	for _, o := range resp.Outputs {
		if o.Name == name {
			v, err := ob.Decode(elem, o.Data)
			return o, v, err
		}
	}
	return nil, nil, fmt.Errorf("no output %s in the response", name)
}

// outputNames lists a response's outputs.
func outputNames(resp *core.InferResponse) []string {
	var names []string
	for _, o := range resp.Outputs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// runSequences runs n sequences of length requests at once, request k of
// sequence i made by req, and hands each response to check; ids alternate
// between numbers and strings.
func runSequences(t *testing.T, s *core.Server, n, length int, req func(id core.Correlation, i, k int) *core.InferRequest,
	check func(i, k int, resp *core.InferResponse) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		id := core.Correlation{ID: uint64(1000 + i)}
		if i%2 == 1 {
			id = core.Correlation{StringID: fmt.Sprintf("sequence-%d", i), IsString: true}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			// A sequence goes on to its END after a failure, so that it
			// frees its slot for the backlog instead of idling out.
			for k := range length {
				resp, err := s.Infer(ctx, req(id, i, k))
				if err == nil {
					err = check(i, k, resp)
				}
				if err != nil && first == nil {
					first = fmt.Errorf("sequence %d request %d: %w", i, k, err)
				}
			}
			if first != nil {
				errs <- first
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestServerAccumulator runs 64 interleaved sequences over the accumulator,
// more than its slots (8 per instance, two instances): each sequence sees
// its own running sum, and never the state output.
func TestServerAccumulator(t *testing.T) {
	for _, elem := range []ob.DataType{ob.Int32, ob.Float} {
		t.Run(elem.String(), func(t *testing.T) {
			config := strings.Replace(ob.AccumulatorConfig(elem), "count: 1", "count: 2", 1)
			root := servertest.WriteRepo(t, map[string]servertest.Model{
				"acc": {Config: config, ONNX: ob.Must(ob.Accumulator(elem))},
			})
			s := servertest.Start(t, servertest.Options{Repo: root})
			const n, length = 64, 6
			x := func(i, k int) float64 { return float64(i*10 + k + 1) }
			runSequences(t, s, n, length,
				func(id core.Correlation, i, k int) *core.InferRequest {
					return seqRequest(t, "acc", id, flagsAt(k, length), elem, []int64{1, 1}, x(i, k))
				},
				func(i, k int, resp *core.InferResponse) error {
					if names := outputNames(resp); !slices.Equal(names, []string{"OUTPUT"}) {
						return fmt.Errorf("outputs %v, want OUTPUT alone", names)
					}
					out, got, err := output(resp, "OUTPUT", elem)
					if err != nil {
						return err
					}
					want := 0.0
					for j := range k + 1 {
						want += x(i, j)
					}
					if len(got) != 1 || got[0] != want || fmt.Sprint(out.Shape) != "[1 1]" {
						return fmt.Errorf("OUTPUT %v %v, want [%v] of shape [1 1]", out.Shape, got, want)
					}
					return nil
				})
			mv, release, err := s.Acquire("acc", core.LatestVersion)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if st := mv.Stats.Snapshot(); st.InferenceCount != n*length {
				t.Errorf("inference count %d, want %d", st.InferenceCount, n*length)
			}
		})
	}
}

// TestServerGrowingState runs sequences whose state grows one element per
// request: HISTORY shows the whole state, from the config's initial zero.
func TestServerGrowingState(t *testing.T) {
	const elem = ob.Int64
	config := strings.Replace(ob.GrowingStateConfig(elem), "count: 1", "count: 2", 1)
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"grow": {Config: config, ONNX: ob.Must(ob.GrowingState(elem))},
	})
	s := servertest.Start(t, servertest.Options{Repo: root})
	const n, length = 6, 9
	x := func(i, k int) float64 { return float64(i*100 + k + 1) }
	runSequences(t, s, n, length,
		func(id core.Correlation, i, k int) *core.InferRequest {
			return seqRequest(t, "grow", id, flagsAt(k, length), elem, []int64{1}, x(i, k))
		},
		func(i, k int, resp *core.InferResponse) error {
			if names := outputNames(resp); !slices.Equal(names, []string{"HISTORY", "OUTPUT"}) {
				return fmt.Errorf("outputs %v, want HISTORY and OUTPUT", names)
			}
			want := []float64{0}
			for j := range k + 1 {
				want = append(want, x(i, j))
			}
			h, got, err := output(resp, "HISTORY", elem)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) || fmt.Sprint(h.Shape) != fmt.Sprint([]int64{int64(k + 2)}) {
				return fmt.Errorf("HISTORY %v %v, want %v", h.Shape, got, want)
			}
			_, sum, err := output(resp, "OUTPUT", elem)
			if err != nil {
				return err
			}
			var total float64
			for _, v := range want {
				total += v
			}
			if len(sum) != 1 || sum[0] != total {
				return fmt.Errorf("OUTPUT %v, want [%v]", sum, total)
			}
			return nil
		})
}

// TestServerSequenceControls shows what the sequence batcher feeds the
// control inputs, for numeric and string correlation ids.
func TestServerSequenceControls(t *testing.T) {
	tests := []struct {
		control, corrid ob.DataType
		id              core.Correlation
	}{
		{ob.Int32, ob.Uint64, core.Correlation{ID: 1<<40 + 3}},
		{ob.Bool, ob.Int64, core.Correlation{ID: 77}},
		{ob.Float, ob.String, core.Correlation{StringID: "the-sequence", IsString: true}},
	}
	for _, tc := range tests {
		t.Run(tc.control.String()+"/"+tc.corrid.String(), func(t *testing.T) {
			root := servertest.WriteRepo(t, map[string]servertest.Model{
				"ctl": {Config: ob.SequenceControlsConfig(tc.control, tc.corrid), ONNX: ob.Must(ob.SequenceControls(tc.control, tc.corrid))},
			})
			s := servertest.Start(t, servertest.Options{Repo: root})
			const length = 3
			for k := range length {
				resp, err := s.Infer(context.Background(), seqRequest(t, "ctl", tc.id, flagsAt(k, length), ob.Int32, []int64{1, 1}, float64(k+5)))
				if err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
				flag := func(on bool) []float64 {
					if on {
						return []float64{1}
					}
					return []float64{0}
				}
				for _, c := range []struct {
					name string
					elem ob.DataType
					want []float64
				}{
					{"OUTPUT", ob.Int32, []float64{float64(k + 5)}},
					{"OUTPUT_START", tc.control, flag(k == 0)},
					{"OUTPUT_END", tc.control, flag(k == length-1)},
					{"OUTPUT_READY", tc.control, flag(true)},
				} {
					if _, got, err := output(resp, c.name, c.elem); err != nil || !slices.Equal(got, c.want) {
						t.Errorf("request %d: %s = %v (%v), want %v", k, c.name, got, err, c.want)
					}
				}
				id, err := corridOf(resp, tc.corrid)
				if err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
				want := fmt.Sprint(tc.id.ID)
				if tc.id.IsString {
					want = tc.id.StringID
				}
				if id != want {
					t.Errorf("request %d: OUTPUT_CORRID = %s, want %s", k, id, want)
				}
			}
		})
	}
}

// corridOf reads OUTPUT_CORRID as text.
func corridOf(resp *core.InferResponse, elem ob.DataType) (string, error) {
	if elem != ob.String {
		_, v, err := output(resp, "OUTPUT_CORRID", elem)
		if err != nil || len(v) != 1 {
			return "", fmt.Errorf("OUTPUT_CORRID %v: %v", v, err)
		}
		return fmt.Sprint(uint64(v[0])), nil
	}
	for _, o := range resp.Outputs {
		if o.Name == "OUTPUT_CORRID" {
			// One BYTES element: a 4-byte little-endian length, then the text.
			if len(o.Data) < 4 {
				return "", fmt.Errorf("OUTPUT_CORRID of %d bytes", len(o.Data))
			}
			return string(o.Data[4:]), nil
		}
	}
	return "", fmt.Errorf("no OUTPUT_CORRID in the response")
}

// TestServerPreviousState carries STRING, BOOL and FP16 states: each
// request gets the input of the one before, the first the initial zero (an
// empty string for STRING).
func TestServerPreviousState(t *testing.T) {
	for _, elem := range []ob.DataType{ob.String, ob.Bool, ob.Float16} {
		t.Run(elem.String(), func(t *testing.T) {
			root := servertest.WriteRepo(t, map[string]servertest.Model{
				"prev": {Config: ob.PreviousConfig(elem), ONNX: ob.Must(ob.Previous(elem))},
			})
			s := servertest.Start(t, servertest.Options{Repo: root})
			const n, length = 12, 5
			// value is sequence i's k-th input as BYTES data or a number.
			value := func(i, k int) (string, float64) {
				return fmt.Sprintf("s%d-r%d", i, k), float64((i + k) % 2)
			}
			if elem == ob.Float16 {
				value = func(i, k int) (string, float64) { return "", float64(i) + float64(k)/4 }
			}
			runSequences(t, s, n, length,
				func(id core.Correlation, i, k int) *core.InferRequest {
					text, num := value(i, k)
					if elem != ob.String {
						return seqRequest(t, "prev", id, flagsAt(k, length), elem, []int64{1, 1}, num)
					}
					id.Flags = flagsAt(k, length)
					return &core.InferRequest{
						ModelName: "prev", ModelVersion: core.LatestVersion, Correlation: id,
						Inputs: []*core.Tensor{{Name: "INPUT", DataType: core.TypeBytes, Shape: []int64{1, 1},
							Data: core.AppendBytesElement(nil, []byte(text))}},
					}
				},
				func(i, k int, resp *core.InferResponse) error {
					if names := outputNames(resp); !slices.Equal(names, []string{"OUTPUT"}) {
						return fmt.Errorf("outputs %v, want OUTPUT alone", names)
					}
					wantText, wantNum := "", 0.0
					if k > 0 {
						wantText, wantNum = value(i, k-1)
					}
					if elem == ob.String {
						want := string(core.AppendBytesElement(nil, []byte(wantText)))
						if got := string(resp.Outputs[0].Data); got != want {
							return fmt.Errorf("OUTPUT %q, want %q", got, want)
						}
						return nil
					}
					_, got, err := output(resp, "OUTPUT", elem)
					if err != nil || len(got) != 1 || got[0] != wantNum {
						return fmt.Errorf("OUTPUT %v (%v), want [%v]", got, err, wantNum)
					}
					return nil
				})
		})
	}
}

// TestServerGrowingStateBatched runs sequences of different lengths on a
// batching model whose state grows: requests whose states differ in length
// never share a batch, and each sequence sees its own history.
func TestServerGrowingStateBatched(t *testing.T) {
	const elem = ob.Int32
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"grow": {Config: ob.GrowingStateBatchedConfig(elem), ONNX: ob.Must(ob.GrowingStateBatched(elem))},
	})
	s := servertest.Start(t, servertest.Options{Repo: root})
	const n, longest = 16, 8
	length := func(i int) int { return 2 + i%(longest-1) }
	x := func(i, k int) float64 { return float64(i*100 + k + 1) }
	runSequences(t, s, n, longest,
		func(id core.Correlation, i, k int) *core.InferRequest {
			// Sequence i is length(i) long; each of its spare turns is a
			// one-request sequence under an id of its own.
			if k >= length(i) {
				id = core.Correlation{ID: uint64(1<<20 + i*longest + k)}
				return seqRequest(t, "grow", id, core.FlagSequenceStart|core.FlagSequenceEnd, elem, []int64{1, 1}, x(i, k))
			}
			return seqRequest(t, "grow", id, flagsAt(k, length(i)), elem, []int64{1, 1}, x(i, k))
		},
		func(i, k int, resp *core.InferResponse) error {
			want := []float64{0}
			if k >= length(i) {
				want = append(want, x(i, k))
			} else {
				for j := range k + 1 {
					want = append(want, x(i, j))
				}
			}
			h, got, err := output(resp, "HISTORY", elem)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) || fmt.Sprint(h.Shape) != fmt.Sprint([]int64{1, int64(len(want))}) {
				return fmt.Errorf("HISTORY %v %v, want %v", h.Shape, got, want)
			}
			var total float64
			for _, v := range want {
				total += v
			}
			if _, sum, err := output(resp, "OUTPUT", elem); err != nil || len(sum) != 1 || sum[0] != total {
				return fmt.Errorf("OUTPUT %v (%v), want [%v]", sum, err, total)
			}
			return nil
		})
}
