package sequence_test

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/inferd/inferd/core"
)

// The direct strategy runs a batch spanning the slots up to the highest
// one with a ready request, as Triton's DirectSequenceBatch: a slot below
// it with nothing ready (a free one, or a live sequence with no request
// waiting) holds a not-ready row, a copy of the batch's first request with
// zeroed inputs and state, START, END and READY false and CORRID 0. The
// not-ready rows' outputs go nowhere and their states are not kept; the
// batch statistics count them, the inference count does not.
func TestSequenceDirectPadsToHighestSlot(t *testing.T) {
	b := &accBackend{}
	s, err := accServer(t, b, `max_batch_size: 4
`+oneInstance+accIO+`sequence_batching {
  control_input [
    { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "R" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  `+accState+` }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// One request at a time: sequence 1 takes slot 0, 2 slot 1, 3 slot 2.
	for _, step := range []struct {
		id    uint64
		flags uint32
		x, y  int32
	}{
		{1, core.FlagSequenceStart, 1, 1},
		{2, core.FlagSequenceStart, 10, 10},
		{3, core.FlagSequenceStart, 100, 100},
		{1, core.FlagSequenceEnd, 2, 3},
		{3, 0, 100, 200}, // slot 0 free, slot 1 live and idle
		{2, core.FlagSequenceEnd, 10, 20},
		{3, core.FlagSequenceEnd, 100, 300},
	} {
		resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: step.id, Flags: step.flags}, step.x, true))
		if err != nil || yOf(t, resp) != step.y {
			t.Fatalf("sequence %d adding %d: %v, %v; want y %d", step.id, step.x, resp, err, step.y)
		}
	}
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	notReady := map[string][]byte{"S": le32(0), "R": {0}, "C": le64(0), "acc_in": le32(0)}
	ready := func(id uint64, start bool, acc uint32) map[string][]byte {
		s := uint32(0)
		if start {
			s = 1
		}
		return map[string][]byte{"S": le32(s), "R": {1}, "C": le64(id), "acc_in": le32(acc)}
	}
	wantRows := []int{1, 2, 3, 1, 3, 2, 3}
	want := [][]map[string][]byte{
		{ready(1, true, 0)},
		{notReady, ready(2, true, 0)},
		{notReady, notReady, ready(3, true, 0)},
		{ready(1, false, 1)},
		{notReady, notReady, ready(3, false, 100)},
		{notReady, ready(2, false, 10)},
		{notReady, notReady, ready(3, false, 200)},
	}
	b.mu.Lock()
	rows, seen := slices.Clone(b.rows), slices.Clone(b.seen)
	b.mu.Unlock()
	if !slices.Equal(rows, wantRows) {
		t.Fatalf("execution rows %v, want %v", rows, wantRows)
	}
	k := 0
	for e, exec := range want {
		for r, row := range exec {
			for name, v := range row {
				if !slices.Equal(seen[k][name], v) {
					t.Errorf("execution %d row %d: %s = %v, want %v", e, r, name, seen[k][name], v)
				}
			}
			k++
		}
	}
	st := stats(t, s)
	var sizes []uint64
	for _, bs := range st.Batches {
		sizes = append(sizes, bs.BatchSize)
	}
	counts := map[uint64]uint64{}
	for _, bs := range st.Batches {
		counts[bs.BatchSize] = bs.ComputeInfer.Count
	}
	if !slices.Equal(sizes, []uint64{1, 2, 3}) || counts[1] != 2 || counts[2] != 2 || counts[3] != 3 ||
		st.ExecutionCount != 7 || st.InferenceCount != 7 {
		t.Errorf("batch sizes %v (executions each %v), executions %d, inferences %d; want [1 2 3] (2, 2, 3), 7, 7",
			sizes, counts, st.ExecutionCount, st.InferenceCount)
	}
}
