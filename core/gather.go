package core

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/inferd/inferd/core/padbatch"
	"github.com/inferd/inferd/repo/modelconfig"
)

// gatherPlan turns the requests of one batch into the backend's inputs
// (concatenated along dim 0, ragged inputs flattened, batch inputs
// computed) and cuts the outputs back per request (triton-inference-server/
// server docs/user_guide/ragged_batching.md).
type gatherPlan struct {
	model       string // for errors
	ragged      map[string]bool
	batchInputs []*modelconfig.BatchInput
	// pad: the inputs padded to the batch's longest (padbatch), nil when
	// the model does not opt in.
	pad *padbatch.Spec
}

func newGatherPlan(cfg *modelconfig.ModelConfig) gatherPlan {
	g := gatherPlan{model: cfg.GetName(), batchInputs: cfg.GetBatchInput()}
	g.pad, _ = padbatch.Parse(cfg) // checked at load (completeConfig)
	for _, in := range cfg.GetInput() {
		if in.GetAllowRaggedBatch() {
			if g.ragged == nil {
				g.ragged = map[string]bool{}
			}
			g.ragged[in.GetName()] = true
		}
	}
	return g
}

// direct reports whether a one-request batch can go to the backend as it is.
func (g *gatherPlan) direct() bool { return g.ragged == nil && len(g.batchInputs) == 0 }

// gather builds the backend batch for reqs (queue order).
func (g *gatherPlan) gather(reqs []*ExecRequest) (*ConcatBatch, error) {
	if len(reqs) == 1 && g.direct() {
		return &reqs[0].batch, nil
	}
	for _, r := range reqs {
		for _, t := range r.Inputs {
			if err := t.OnHost(); err != nil { // concatenated on the host
				return nil, &Error{Code: CodeInternal, Msg: err.Error()}
			}
		}
	}
	first := reqs[0]
	b := &ConcatBatch{Inputs: make([]*Tensor, 0, len(first.Inputs)+len(g.batchInputs))}
	width := g.padWidth(reqs)
	for i, t := range first.Inputs {
		if v, ok := g.pad.Pads(t.Name); ok && len(reqs) > 1 {
			pt, err := padded(reqs, i, width, v)
			if err != nil {
				return nil, err
			}
			b.Inputs = append(b.Inputs, pt)
			continue
		}
		size := 0
		for _, r := range reqs {
			size += len(r.Inputs[i].Data)
		}
		data := make([]byte, 0, size)
		var rows, elems int64
		for _, r := range reqs {
			rt := r.Inputs[i]
			data = append(data, rt.Data...)
			elems += ElementCount(rt.Shape)
			if len(rt.Shape) > 0 {
				rows += rt.Shape[0]
			}
		}
		var shape []int64
		switch {
		case g.ragged[t.Name]:
			shape = []int64{elems}
		case len(reqs) == 1:
			shape = t.Shape
		default:
			shape = append([]int64{rows}, t.Shape[1:]...)
		}
		b.Inputs = append(b.Inputs, &Tensor{Name: t.Name, DataType: t.DataType, Shape: shape, Data: data})
	}
	for _, bi := range g.batchInputs {
		t, err := batchInput(bi, reqs)
		if err != nil {
			return nil, err
		}
		b.Inputs = append(b.Inputs, t)
	}
	b.Outputs = first.Outputs
	for _, r := range reqs[1:] {
		if !slices.Equal(r.Outputs, b.Outputs) {
			b.Outputs = unionSorted(b.Outputs, r.Outputs)
		}
	}
	return b, nil
}

// padWidth is the longest last dim of the paddable inputs of reqs: every
// paddable input of the batch is padded to it, so that they keep agreeing
// with each other (ids and mask of one length). -1: the model pads none.
func (g *gatherPlan) padWidth(reqs []*ExecRequest) int64 {
	if g.pad == nil {
		return -1
	}
	var width int64
	for _, r := range reqs {
		for _, t := range r.Inputs {
			if _, ok := g.pad.Pads(t.Name); ok && len(t.Shape) > 0 {
				width = max(width, t.Shape[len(t.Shape)-1])
			}
		}
	}
	return width
}

// padded concatenates input i of reqs along dim 0 with every row's last
// dim padded with v to width (padbatch): one allocation, as the plain
// concatenation.
func padded(reqs []*ExecRequest, i int, width, v int64) (*Tensor, error) {
	first := reqs[0].Inputs[i]
	size := int64(first.DataType.ByteSize())
	if size <= 0 || size > 8 || len(first.Shape) < 2 {
		return nil, Errorf(CodeInvalidArg, "input '%s' (%s %v) cannot be padded", first.Name, first.DataType, first.Shape)
	}
	var lines int64 // rows × inner dims: the runs of the last dim
	for _, r := range reqs {
		t := r.Inputs[i]
		lines += ElementCount(t.Shape[:len(t.Shape)-1])
	}
	data := make([]byte, lines*width*size)
	var pv [8]byte
	binary.LittleEndian.PutUint64(pv[:], uint64(v)) // little-endian: the low bytes are the narrower type's
	fill := v != 0
	at := int64(0)
	var rows int64
	for _, r := range reqs {
		t := r.Inputs[i]
		w := t.Shape[len(t.Shape)-1]
		n := ElementCount(t.Shape[:len(t.Shape)-1])
		if int64(len(t.Data)) != n*w*size || w > width {
			return nil, Errorf(CodeInvalidArg, "input '%s': %d bytes do not hold shape %v", t.Name, len(t.Data), t.Shape)
		}
		rows += t.Shape[0]
		for k := range n {
			copy(data[at:], t.Data[k*w*size:(k+1)*w*size])
			if fill {
				for p := at + w*size; p < at+width*size; p += size {
					copy(data[p:p+size], pv[:size])
				}
			}
			at += width * size
		}
	}
	shape := make([]int64, len(first.Shape))
	copy(shape, first.Shape)
	shape[0], shape[len(shape)-1] = rows, width
	return &Tensor{Name: first.Name, DataType: first.DataType, Shape: shape, Data: data}, nil
}

// unionSorted merges two ascending name lists.
func unionSorted(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// scatter cuts each request's rows out of the batch's outputs; a request
// whose rows cannot be cut gets its own error in errs. The per-request
// tensors, shapes and result lists come from three shared allocations.
func (g *gatherPlan) scatter(b *ConcatBatch, reqs []*ExecRequest) (outs [][]*Tensor, errs []error) {
	outs, errs = make([][]*Tensor, len(reqs)), make([]error, len(reqs))
	if len(reqs) == 1 && b == &reqs[0].batch {
		outs[0] = b.Results
		return outs, errs
	}
	nOut, dims := 0, 0
	for _, r := range reqs {
		nOut += len(r.Outputs)
	}
	for _, r := range b.Results {
		dims += len(r.Shape)
	}
	tensors := make([]Tensor, nOut)
	lists := make([]*Tensor, nOut)
	shapes := make([]int64, 0, dims*len(reqs))
	var offset int64
	for i, r := range reqs {
		rows := int64(r.BatchSize)
		n := len(r.Outputs)
		outs[i] = lists[:0:n]
		lists = lists[n:]
		for _, name := range r.Outputs {
			k := slices.Index(b.Outputs, name)
			if k < 0 || k >= len(b.Results) {
				errs[i] = Errorf(CodeInternal, "output '%s' missing from the batch results", name)
				break
			}
			t := &tensors[0]
			tensors = tensors[1:]
			src := b.Results[k]
			if len(src.Shape) > 0 {
				start := len(shapes)
				shapes = append(append(shapes, rows), src.Shape[1:]...)
				t.Shape = shapes[start:len(shapes):len(shapes)]
			}
			if err := sliceRows(t, src, offset, rows); err != nil {
				errs[i] = err
				break
			}
			outs[i] = append(outs[i], t)
		}
		offset += rows
	}
	return outs, errs
}

// sliceRows sets dst to rows [from, from+n) of t along dim 0, sharing t's
// data; dst.Shape must already hold the cut shape.
func sliceRows(dst, t *Tensor, from, n int64) error {
	if len(t.Shape) == 0 || t.Shape[0] < from+n {
		lead := int64(0)
		if len(t.Shape) > 0 {
			lead = t.Shape[0]
		}
		return Errorf(CodeInternal, "failed to split the output tensor '%s' in responses: expected batch size of at least %d in model output, got %d", t.Name, from+n, lead)
	}
	dst.Name, dst.DataType = t.Name, t.DataType
	if t.Shape[0] == n && from == 0 {
		dst.Data = t.Data
		return nil
	}
	rowElems := ElementCount(t.Shape[1:])
	if t.DataType != TypeBytes {
		rowBytes := rowElems * int64(t.DataType.ByteSize())
		dst.Data = t.Data[from*rowBytes : (from+n)*rowBytes : (from+n)*rowBytes]
		return nil
	}
	// BYTES: walk the length-prefixed elements to find the row boundaries.
	start := bytesOffset(t.Data, from*rowElems)
	end := -1
	if start >= 0 {
		if size := bytesOffset(t.Data[start:], n*rowElems); size >= 0 {
			end = start + size
		}
	}
	if end < 0 {
		return Errorf(CodeInternal, "failed to split the output tensor '%s': element framing is broken", t.Name)
	}
	dst.Data = t.Data[start:end:end]
	return nil
}

// batchInput computes one batch_input tensor over the requests of a batch.
func batchInput(bi *modelconfig.BatchInput, reqs []*ExecRequest) (*Tensor, error) {
	name := bi.GetTargetName()[0]
	dt := DataType(bi.GetDataType())
	var src []*Tensor
	for _, r := range reqs {
		var t *Tensor
		for _, in := range r.Inputs {
			if len(bi.GetSourceInput()) > 0 && in.Name == bi.GetSourceInput()[0] {
				t = in
			}
		}
		if t == nil {
			return nil, Errorf(CodeInvalidArg, "batch input '%s': source input is missing from a request", name)
		}
		src = append(src, t)
	}
	var values []int64
	var shape []int64
	switch bi.GetKind() {
	case modelconfig.BatchInput_BATCH_ELEMENT_COUNT, modelconfig.BatchInput_BATCH_ACCUMULATED_ELEMENT_COUNT,
		modelconfig.BatchInput_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO:
		acc := bi.GetKind() != modelconfig.BatchInput_BATCH_ELEMENT_COUNT
		if bi.GetKind() == modelconfig.BatchInput_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO {
			values = append(values, 0)
		}
		var sum int64
		for _, t := range src {
			n := ElementCount(t.Shape)
			sum += n
			if acc {
				n = sum
			}
			values = append(values, n)
		}
		shape = []int64{int64(len(values))}
	case modelconfig.BatchInput_BATCH_MAX_ELEMENT_COUNT_AS_SHAPE:
		var most int64
		for _, t := range src {
			most = max(most, ElementCount(t.Shape))
		}
		values = make([]int64, most)
		shape = []int64{most}
	case modelconfig.BatchInput_BATCH_ITEM_SHAPE, modelconfig.BatchInput_BATCH_ITEM_SHAPE_FLATTEN:
		var rows, rank int64
		for _, t := range src {
			if len(t.Shape) == 0 {
				return nil, Errorf(CodeInvalidArg, "batch input '%s': source input has no batch dimension", name)
			}
			rank = int64(len(t.Shape) - 1)
			for range t.Shape[0] {
				values = append(values, t.Shape[1:]...)
			}
			rows += t.Shape[0]
		}
		shape = []int64{rows, rank}
		if bi.GetKind() == modelconfig.BatchInput_BATCH_ITEM_SHAPE_FLATTEN {
			shape = []int64{rows * rank}
		}
	default:
		return nil, Errorf(CodeUnsupported, "batch input '%s': kind %s is not supported", name, bi.GetKind())
	}
	data := make([]byte, 0, 4*len(values))
	for _, v := range values {
		switch dt {
		case TypeFP32:
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		case TypeInt32:
			data = binary.LittleEndian.AppendUint32(data, uint32(int32(v)))
		default:
			return nil, Errorf(CodeInvalidArg, "batch input '%s' must be TYPE_INT32 or TYPE_FP32, not %s", name, dt)
		}
	}
	return &Tensor{Name: name, DataType: dt, Shape: shape, Data: data}, nil
}
