package openai

import (
	"encoding/binary"
	"math"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/textmodel"
)

// f32 is element i of FP32 data.
func f32(data []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
}

// pooledRows copies rows of an [n, H] output into dst[lo:].
func pooledRows(t *core.Tensor, dst [][]float32, lo int) {
	n, h := int(t.Shape[0]), int(t.Shape[1])
	for i := range n {
		v := make([]float32, h)
		for j := range v {
			v[j] = f32(t.Data, i*h+j)
		}
		dst[lo+i] = v
	}
}

// poolRows pools the token embeddings [n, L, H] of rows into dst[lo:]:
// only each row's own positions count (those whose attention mask is 1,
// the first len(row) as rows are padded on the right), so padding never
// changes a vector (sentence-transformers' Pooling.forward: mean and max
// over the mask, cls the first position, lasttoken the last attended one).
func poolRows(t *core.Tensor, rows []row, p textmodel.Pooling, dst [][]float32, lo int) {
	width, h := int(t.Shape[1]), int(t.Shape[2])
	acc := make([]float64, h)
	for i, r := range rows {
		base := i * width * h
		at := func(pos, j int) float64 { return float64(f32(t.Data, base+pos*h+j)) }
		n := min(len(r.ids), width)
		v := make([]float32, h)
		switch p {
		case textmodel.CLS:
			for j := range v {
				v[j] = float32(at(0, j))
			}
		case textmodel.LastToken:
			for j := range v {
				v[j] = float32(at(n-1, j))
			}
		case textmodel.Max:
			for j := range v {
				m := math.Inf(-1)
				for pos := range n {
					m = math.Max(m, at(pos, j))
				}
				v[j] = float32(m)
			}
		default: // mean
			clear(acc)
			for pos := range n {
				for j := range acc {
					acc[j] += at(pos, j)
				}
			}
			for j := range v {
				v[j] = float32(acc[j] / float64(max(n, 1)))
			}
		}
		dst[lo+i] = v
	}
}

// finish applies dimensions (keep the first d components; 0: all) and
// then L2 normalisation when normalize is set; a zero vector stays zero.
func finish(v []float32, dims int, normalize bool) []float32 {
	if dims > 0 && dims < len(v) {
		v = v[:dims]
	}
	if !normalize {
		return v
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v
}

// sigmoid is a reranker's relevance score from its logit.
func sigmoid(x float32) float64 { return 1 / (1 + math.Exp(-float64(x))) }
