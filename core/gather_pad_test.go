package core

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/inferd/inferd/core/padbatch"
)

// intRows makes a [len(rows), w] tensor of rows (all of one width w) as
// little-endian integers of size bytes.
func intRows(name string, dt DataType, rows ...[]int64) *Tensor {
	size := dt.ByteSize()
	w := len(rows[0])
	data := make([]byte, 0, len(rows)*w*size)
	for _, r := range rows {
		for _, v := range r {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			data = append(data, b[:size]...)
		}
	}
	return &Tensor{Name: name, DataType: dt, Shape: []int64{int64(len(rows)), int64(w)}, Data: data}
}

// values reads t's data back as integers.
func values(t *Tensor) []int64 {
	size := t.DataType.ByteSize()
	var out []int64
	for at := 0; at < len(t.Data); at += size {
		var b [8]byte
		copy(b[:], t.Data[at:at+size])
		v := int64(binary.LittleEndian.Uint64(b[:]))
		if size == 4 {
			v = int64(int32(v))
		}
		out = append(out, v)
	}
	return out
}

func TestGatherPadsToTheLongest(t *testing.T) {
	pad := &padbatch.Spec{Pad: map[string]int64{"ids": 7, "mask": 0}}
	for _, tc := range []struct {
		name      string
		reqs      [][]*Tensor
		wantShape []int64
		want      [][]int64 // per input
	}{
		{
			name: "int64 three lengths",
			reqs: [][]*Tensor{
				{intRows("ids", TypeInt64, []int64{1, 2}), intRows("mask", TypeInt64, []int64{1, 1}), intRows("x", TypeInt64, []int64{5})},
				{intRows("ids", TypeInt64, []int64{3, 4, 5, 6}), intRows("mask", TypeInt64, []int64{1, 1, 1, 1}), intRows("x", TypeInt64, []int64{6})},
				{intRows("ids", TypeInt64, []int64{8}, []int64{9}), intRows("mask", TypeInt64, []int64{1}, []int64{1}), intRows("x", TypeInt64, []int64{7}, []int64{8})},
			},
			wantShape: []int64{4, 4},
			want: [][]int64{
				{1, 2, 7, 7, 3, 4, 5, 6, 8, 7, 7, 7, 9, 7, 7, 7},
				{1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0},
				{5, 6, 7, 8},
			},
		},
		{
			name: "int32 equal lengths",
			reqs: [][]*Tensor{
				{intRows("ids", TypeInt32, []int64{-1, 2}), intRows("mask", TypeInt32, []int64{1, 1})},
				{intRows("ids", TypeInt32, []int64{3, 4}), intRows("mask", TypeInt32, []int64{1, 1})},
			},
			wantShape: []int64{2, 2},
			want:      [][]int64{{-1, 2, 3, 4}, {1, 1, 1, 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := gatherPlan{pad: pad}
			var reqs []*ExecRequest
			for _, in := range tc.reqs {
				reqs = append(reqs, &ExecRequest{Inputs: in, Outputs: []string{"y"}, BatchSize: uint64(in[0].Shape[0])})
			}
			b, err := plan.gather(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				got := b.Inputs[i]
				if i < 2 && !slices.Equal(got.Shape, tc.wantShape) {
					t.Errorf("%s: shape %v, want %v", got.Name, got.Shape, tc.wantShape)
				}
				if v := values(got); !slices.Equal(v, want) {
					t.Errorf("%s: %v, want %v", got.Name, v, want)
				}
			}
		})
	}
}

func TestGatherPadRefusesBrokenInput(t *testing.T) {
	plan := gatherPlan{pad: &padbatch.Spec{Pad: map[string]int64{"ids": 0}}}
	bad := intRows("ids", TypeInt64, []int64{1, 2})
	bad.Data = bad.Data[:8] // one element for shape [1, 2]
	reqs := []*ExecRequest{
		{Inputs: []*Tensor{intRows("ids", TypeInt64, []int64{1})}, BatchSize: 1},
		{Inputs: []*Tensor{bad}, BatchSize: 1},
	}
	if _, err := plan.gather(reqs); err == nil {
		t.Fatal("gather accepted an input whose data does not hold its shape")
	}
}
