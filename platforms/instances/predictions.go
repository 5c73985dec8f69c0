package instances

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// AppendPredictions appends the JSON array of n instances' predictions
// (the whole outputs' one without batching): row i of each output, nested
// to the row shape; with several outputs, an object keyed by output name.
// Elements are written as in a v2 JSON response (codec.AppendGenerateValue).
// The cloud writes the envelope around it.
func AppendPredictions(b []byte, outs []*core.Tensor, n int, batching bool) ([]byte, error) {
	p, err := NewPredictions(outs, n, batching)
	if err != nil {
		return nil, err
	}
	b = append(b, '[')
	for i := range p.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = p.AppendNext(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// Predictions reads a response's outputs a prediction (an instance's
// rows) at a time.
type Predictions struct {
	outs []*core.Tensor
	rows []outputRows
	n    int
}

// NewPredictions splits outs into n instances' predictions; without
// batching there is one, the whole outputs.
func NewPredictions(outs []*core.Tensor, n int, batching bool) (Predictions, error) {
	if !batching {
		n = 1
	}
	p := Predictions{outs: outs, rows: make([]outputRows, len(outs)), n: n}
	for o, t := range outs {
		if err := p.rows[o].init(t, n, batching); err != nil {
			return Predictions{}, err
		}
	}
	return p, nil
}

// Len is the number of predictions.
func (p *Predictions) Len() int { return p.n }

// AppendNext appends the next prediction: its only output's row, or an
// object of output name to row.
func (p *Predictions) AppendNext(b []byte) ([]byte, error) {
	if len(p.outs) == 1 {
		return p.rows[0].next(b, p.rows[0].shape)
	}
	b = append(b, '{')
	for o := range p.rows {
		if o > 0 {
			b = append(b, ',')
		}
		b = tritonjson.AppendString(b, p.outs[o].Name)
		b = append(b, ':')
		var err error
		if b, err = p.rows[o].next(b, p.rows[o].shape); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// NextElements passes the next prediction's elements to each, output by
// output in row-major order, each as its JSON text (valid until the next
// call of each).
func (p *Predictions) NextElements(each func(elem []byte)) error {
	var buf []byte
	for o := range p.rows {
		r := &p.rows[o]
		count := int64(1)
		for _, d := range r.shape {
			count *= d
		}
		for range count {
			var err error
			if buf, err = r.element(buf[:0]); err != nil {
				return err
			}
			each(buf)
		}
	}
	return nil
}

// outputRows reads one output's elements in order, a row at a time.
type outputRows struct {
	t     *core.Tensor
	shape []int64 // a row's shape
	off   int     // the next element's offset in t.Data
	elem  core.Tensor
}

func (r *outputRows) init(t *core.Tensor, n int, batching bool) error {
	r.t, r.shape = t, t.Shape
	if batching {
		if len(r.shape) == 0 || r.shape[0] != int64(n) {
			return fmt.Errorf("output '%s' has shape %v: its first dimension must be the %d instances", t.Name, r.shape, n)
		}
		r.shape = r.shape[1:]
	}
	count := int64(1) // a scalar's, for an empty shape
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && count > math.MaxInt64/d) {
			return errOutputSize(t.Name)
		}
		count *= d
	}
	if t.DataType != core.TypeBytes && (count > int64(len(t.Data)) || int64(len(t.Data)) != count*int64(t.DataType.ByteSize())) {
		return errOutputSize(t.Name)
	}
	r.elem = core.Tensor{Name: t.Name, DataType: t.DataType}
	return nil
}

// next appends the next shape's worth of elements as nested arrays (a
// scalar for an empty shape).
func (r *outputRows) next(b []byte, shape []int64) ([]byte, error) {
	if len(shape) == 0 {
		return r.element(b)
	}
	b = append(b, '[')
	for j := range shape[0] {
		if j > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = r.next(b, shape[1:]); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// element appends the next element.
func (r *outputRows) element(b []byte) ([]byte, error) {
	data := r.t.Data[r.off:]
	size := r.t.DataType.ByteSize()
	if r.t.DataType == core.TypeBytes {
		if len(data) < 4 || int(binary.LittleEndian.Uint32(data)) > len(data)-4 {
			return nil, errOutputSize(r.t.Name)
		}
		size = 4 + int(binary.LittleEndian.Uint32(data))
	}
	r.elem.Data = data[:size:size]
	r.off += size
	return codec.AppendGenerateValue(b, &r.elem)
}

// errOutputSize is the v2 JSON writer's failure for an output whose data
// does not match its shape (platforms/codec).
func errOutputSize(name string) error {
	return core.Errorf(core.CodeInternal, "output tensor shape does not match size of output for '%s'", name)
}
