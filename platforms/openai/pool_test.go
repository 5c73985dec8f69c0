package openai

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/textmodel"
)

// tokens is an FP32 [2, 3, 2] output: row 0 has 3 tokens, row 1 two and
// one padded position holding a large value that must never count.
func tokens() *core.Tensor {
	vals := []float32{
		1, -1, 3, 2, -2, 5, // row 0
		4, 0, 2, 6, 100, 100, // row 1, last position padded
	}
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &core.Tensor{Name: "t", DataType: core.TypeFP32, Shape: []int64{2, 3, 2}, Data: data}
}

func TestPoolRows(t *testing.T) {
	rows := []row{{ids: []int64{1, 2, 3}}, {ids: []int64{1, 2}}}
	tests := []struct {
		pool textmodel.Pooling
		want [][]float32
	}{
		{textmodel.Mean, [][]float32{{2.0 / 3, 2}, {3, 3}}},
		{textmodel.Max, [][]float32{{3, 5}, {4, 6}}},
		{textmodel.CLS, [][]float32{{1, -1}, {4, 0}}},
		{textmodel.LastToken, [][]float32{{-2, 5}, {2, 6}}},
	}
	for _, tc := range tests {
		got := make([][]float32, 2)
		poolRows(tokens(), rows, tc.pool, got, 0)
		for i := range got {
			for j := range got[i] {
				if math.Abs(float64(got[i][j]-tc.want[i][j])) > 1e-6 {
					t.Fatalf("%s: %v, want %v", tc.pool, got, tc.want)
				}
			}
		}
	}
}

func TestFinish(t *testing.T) {
	tests := []struct {
		in        []float32
		dims      int
		normalize bool
		want      []float32
	}{
		{[]float32{3, 4}, 0, true, []float32{0.6, 0.8}},
		{[]float32{3, 4, 12}, 2, true, []float32{0.6, 0.8}},
		{[]float32{3, 4, 12}, 2, false, []float32{3, 4}},
		{[]float32{0, 0}, 0, true, []float32{0, 0}},
	}
	for _, tc := range tests {
		if got := finish(slices.Clone(tc.in), tc.dims, tc.normalize); !slices.Equal(got, tc.want) {
			t.Errorf("finish(%v, %d, %v) = %v, want %v", tc.in, tc.dims, tc.normalize, got, tc.want)
		}
	}
}
