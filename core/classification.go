package core

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
)

// MaxClassificationElements bounds the elements of one batch item that the
// classification extension ranks (Triton rejects larger outputs).
const MaxClassificationElements = 1000000

// Classify implements the classification extension (triton-inference-server/server
// docs/protocol/extension_classification.md, src/classification.cc): it
// replaces output t by a BYTES tensor of the top-k "<value>:<index>[:<label>]"
// strings, ranked per batch item when batching (the model has
// max_batch_size > 0 and t has a first dimension), else over the whole
// tensor. labels[i] is the label of index i ("" or absent: none).
//
// The result shape is [B, min(k, N)] or [min(k, N)] with N the elements of
// one item. Values print like C's %f for FP32 (widened) and FP64, in decimal
// for integers. Ties keep ascending index order (Triton leaves them
// unspecified).
func Classify(t *Tensor, k uint64, batching bool, labels []string) (*Tensor, error) {
	size := t.DataType.ByteSize()
	if size == 0 {
		return nil, unsupportedClassType(t.DataType)
	}
	// Triton's arithmetic: the batch size is the first dimension when
	// batching, and an item has the product of the remaining dimensions
	// (all of them when the batch size is 0; 1 for a shape of []).
	var batch int64
	if batching && len(t.Shape) > 0 {
		batch = max(t.Shape[0], 0)
	}
	first := 0
	if batch > 0 {
		first = 1
	}
	per := int64(1)
	for _, d := range t.Shape[first:] {
		if d <= 0 {
			per = 0
			break
		}
		if per > math.MaxInt64/d {
			per = math.MaxInt64
			break
		}
		per *= d
	}
	kk := int64(min(k, uint64(per)))
	items := max(batch, 1)
	// A tensor whose data is shorter than its shape cannot come from a
	// well-behaved backend; Triton would rank nothing and emit a
	// malformed tensor, we report the JSON writer's error instead.
	itemBytes := per * int64(size) // per <= MaxInt64/size unless it exceeds the data below
	if per > int64(len(t.Data))/int64(size) || (per > 0 && items > int64(len(t.Data))/itemBytes) {
		return nil, Errorf(CodeInternal, "output tensor shape does not match size of output for '%s'", t.Name)
	}
	if per > MaxClassificationElements {
		return nil, Errorf(CodeInvalidArg, "classification output tensor too large")
	}

	var out []byte
	var idx []int32
	if per > 0 {
		for b := int64(0); b < items; b++ {
			data := t.Data[b*itemBytes : (b+1)*itemBytes]
			var err error
			out, idx, err = appendTopK(out, idx, t.DataType, data, int(per), int(kk), labels)
			if err != nil {
				return nil, err
			}
		}
	} else if _, _, err := appendTopK(nil, nil, t.DataType, nil, 0, 0, nil); err != nil {
		return nil, err
	}
	shape := []int64{kk}
	if batch > 0 {
		shape = []int64{batch, kk}
	}
	return &Tensor{Name: t.Name, DataType: TypeBytes, Shape: shape, Data: out}, nil
}

func unsupportedClassType(dt DataType) error {
	return Errorf(CodeInvalidArg, "class result not available for output due to unsupported type '%s'", dt)
}

// appendTopK ranks the n elements of data and appends the k best as BYTES
// elements. idx is scratch space reused across batch items.
func appendTopK(out []byte, idx []int32, dt DataType, data []byte, n, k int, labels []string) ([]byte, []int32, error) {
	le := binary.LittleEndian
	switch dt {
	case TypeUint8:
		return rankInts(out, idx, n, k, labels, func(i int) uint64 { return uint64(data[i]) })
	case TypeUint16:
		return rankInts(out, idx, n, k, labels, func(i int) uint64 { return uint64(le.Uint16(data[2*i:])) })
	case TypeUint32:
		return rankInts(out, idx, n, k, labels, func(i int) uint64 { return uint64(le.Uint32(data[4*i:])) })
	case TypeUint64:
		return rankInts(out, idx, n, k, labels, func(i int) uint64 { return le.Uint64(data[8*i:]) })
	case TypeInt8:
		return rankInts(out, idx, n, k, labels, func(i int) int64 { return int64(int8(data[i])) })
	case TypeInt16:
		return rankInts(out, idx, n, k, labels, func(i int) int64 { return int64(int16(le.Uint16(data[2*i:]))) })
	case TypeInt32:
		return rankInts(out, idx, n, k, labels, func(i int) int64 { return int64(int32(le.Uint32(data[4*i:]))) })
	case TypeInt64:
		return rankInts(out, idx, n, k, labels, func(i int) int64 { return int64(le.Uint64(data[8*i:])) })
	case TypeFP32:
		return rankFloats(out, idx, n, k, labels, func(i int) float64 { return float64(math.Float32frombits(le.Uint32(data[4*i:]))) })
	case TypeFP64:
		return rankFloats(out, idx, n, k, labels, func(i int) float64 { return math.Float64frombits(le.Uint64(data[8*i:])) })
	}
	return out, idx, unsupportedClassType(dt)
}

func rankInts[T int64 | uint64](out []byte, idx []int32, n, k int, labels []string, at func(int) T) ([]byte, []int32, error) {
	vals := make([]T, n)
	for i := range vals {
		vals[i] = at(i)
	}
	idx = topK(idx, n, k, func(a, b int32) bool { return vals[a] > vals[b] })
	var buf [24]byte
	for _, i := range idx {
		var s []byte
		if v := vals[i]; v < 0 {
			s = strconv.AppendInt(buf[:0], int64(v), 10)
		} else {
			s = strconv.AppendUint(buf[:0], uint64(v), 10)
		}
		out = appendClass(out, s, i, labels)
	}
	return out, idx, nil
}

func rankFloats(out []byte, idx []int32, n, k int, labels []string, at func(int) float64) ([]byte, []int32, error) {
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = at(i)
	}
	// NaN ranks below every number, so results do not depend on where a
	// NaN sits in the tensor.
	better := func(a, b int32) bool {
		x, y := vals[a], vals[b]
		if math.IsNaN(y) {
			return !math.IsNaN(x)
		}
		return x > y
	}
	idx = topK(idx, n, k, better)
	var buf [64]byte
	for _, i := range idx {
		out = appendClass(out, appendCFloat(buf[:0], vals[i]), i, labels)
	}
	return out, idx, nil
}

// topK returns the indices of the k best of n elements, best first; ties go
// to the lower index. Small k use a bounded heap instead of a full sort.
func topK(idx []int32, n, k int, better func(a, b int32) bool) []int32 {
	// before orders candidates: better value, then lower index.
	before := func(a, b int32) bool {
		if better(a, b) {
			return true
		}
		if better(b, a) {
			return false
		}
		return a < b
	}
	idx = idx[:0]
	if k <= 0 {
		return idx
	}
	if k*4 >= n {
		for i := 0; i < n; i++ {
			idx = append(idx, int32(i))
		}
		slices.SortFunc(idx, func(a, b int32) int {
			if before(a, b) {
				return -1
			}
			if before(b, a) {
				return 1
			}
			return cmp.Compare(a, b)
		})
		return idx[:k]
	}
	// Min-heap (by "before") of the k best so far: the root is the worst
	// kept candidate.
	for i := 0; i < n; i++ {
		c := int32(i)
		if len(idx) < k {
			idx = append(idx, c)
			for j := len(idx) - 1; j > 0; {
				p := (j - 1) / 2
				if !before(idx[p], idx[j]) {
					break
				}
				idx[p], idx[j] = idx[j], idx[p]
				j = p
			}
			continue
		}
		if !before(c, idx[0]) {
			continue
		}
		idx[0] = c
		for j := 0; ; {
			l, r, w := 2*j+1, 2*j+2, j
			if l < k && before(idx[w], idx[l]) {
				w = l
			}
			if r < k && before(idx[w], idx[r]) {
				w = r
			}
			if w == j {
				break
			}
			idx[j], idx[w] = idx[w], idx[j]
			j = w
		}
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	return idx
}

// appendClass appends one BYTES element "<value>:<index>[:<label>]".
func appendClass(out, value []byte, i int32, labels []string) []byte {
	var label string
	if int(i) < len(labels) {
		label = labels[i]
	}
	var num [12]byte
	index := strconv.AppendInt(num[:0], int64(i), 10)
	n := len(value) + 1 + len(index)
	if label != "" {
		n += 1 + len(label)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(n))
	out = append(out, value...)
	out = append(out, ':')
	out = append(out, index...)
	if label != "" {
		out = append(out, ':')
		out = append(out, label...)
	}
	return out
}

// appendCFloat formats v like C's printf("%f") (std::to_string), including
// glibc's spellings of infinities and NaN.
func appendCFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		if math.Signbit(v) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	case math.IsInf(v, 1):
		return append(b, "inf"...)
	case math.IsInf(v, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, v, 'f', 6, 64)
}
