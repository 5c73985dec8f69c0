package core

import (
	"context"
	"encoding/binary"

	"slices"
	"strings"
	"testing"
)

// The gather and scatter of a concatenated batch (execution.go, gather.go),
// seen through the dynamic batcher.
func TestScatterAndStats(t *testing.T) {
	s, b, a := busy(t, `max_batch_size: 16
dynamic_batching {}
input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] } ]
`+oneInstance, 2)
	ctx := context.Background()
	base := stats(t, s)
	rows := []int{1, 3, 8}
	for i, n := range rows {
		a.send(ctx, batchReq(int32(1000*(i+1)), n, 2))
	}
	if n := step(t, b); n != 12 {
		t.Fatalf("batched execution has %d rows, want 12", n)
	}
	b.gate <- struct{}{}
	// Checklist 36: each request gets its own rows back, in its shape.
	for i, n := range rows {
		r := a.wait(i + 1)
		if r.err != nil {
			t.Fatal(r.err)
		}
		y := r.resp.Outputs[0]
		if !slices.Equal(y.Shape, []int64{int64(n), 2}) {
			t.Fatalf("request %d: shape %v, want [%d 2]", i, y.Shape, n)
		}
		want := batchReq(int32(1000*(i+1)), n, 2).Inputs[0].Data
		if string(y.Data) != string(want) {
			t.Fatalf("request %d got another request's rows", i)
		}
	}
	// As Triton counts them (triton-inference-server/server
	// docs/user_guide/metrics.md): batched requests count once each, one
	// execution.
	got := stats(t, s)
	if d := got.Success.Count - base.Success.Count; d != 4 {
		t.Fatalf("success +%d, want +4", d)
	}
	if d := got.InferenceCount - base.InferenceCount; d != 1+12 {
		t.Fatalf("inference count +%d, want +13", d)
	}
	if d := got.ExecutionCount - base.ExecutionCount; d != 2 {
		t.Fatalf("execution count +%d, want +2", d)
	}
	if got.Pending != 0 {
		t.Fatalf("pending %d after drain", got.Pending)
	}
}

func TestRaggedInputIsFlattened(t *testing.T) {
	_, b, a := busy(t, `max_batch_size: 8
dynamic_batching {}
input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
`+oneInstance, 2)
	ctx := context.Background()
	a.send(ctx, batchReq(10, 1, 3))
	a.send(ctx, batchReq(20, 1, 1))
	step(t, b)
	b.gate <- struct{}{}
	for i := range a.res {
		a.wait(i) // the echo output cannot be split per request: not the point here
	}
	_, shapes := b.executions()
	want := [][]int64{{2}, {4}}
	if !slices.EqualFunc(shapes, want, slices.Equal) {
		t.Fatalf("execution shapes %v, want %v (ragged inputs concatenated into 1-D)", shapes, want)
	}
}

func TestSplitFailureFailsOnlyShortRequests(t *testing.T) {
	reqs := []*ExecRequest{{BatchSize: 1, Outputs: []string{"y"}}, {BatchSize: 2, Outputs: []string{"y"}}}
	b := &ConcatBatch{Outputs: []string{"y"}, Results: []*Tensor{{Name: "y", DataType: TypeInt32, Shape: []int64{2}, Data: make([]byte, 8)}}}
	var g gatherPlan
	_, errs := g.scatter(b, reqs)
	if errs[0] != nil {
		t.Fatalf("first request's rows exist: %v", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "failed to split the output tensor") {
		t.Fatalf("second request: %v, want a split error", errs[1])
	}
}

func TestSliceRowsBytes(t *testing.T) {
	var data []byte
	for _, s := range []string{"a", "bb", "", "dddd"} {
		data = binary.LittleEndian.AppendUint32(data, uint32(len(s)))
		data = append(data, s...)
	}
	tensor := &Tensor{Name: "s", DataType: TypeBytes, Shape: []int64{2, 2}, Data: data}
	got := &Tensor{}
	if err := sliceRows(got, tensor, 1, 1); err != nil {
		t.Fatal(err)
	}
	if elems, err := BytesElements(got.Data); err != nil || len(elems) != 2 || string(elems[0]) != "" || string(elems[1]) != "dddd" {
		t.Fatalf("row 1 = %q", elems)
	}
	if err := sliceRows(&Tensor{}, tensor, 1, 2); err == nil {
		t.Fatal("cutting past the end succeeded")
	}
}
