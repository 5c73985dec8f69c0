package onnxrt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
)

// runScratch holds one Execute's ORT values; it lives in the instance so a
// steady stream of batches reuses the slices.
type runScratch struct {
	inputs  []ort.Value
	outputs []ort.Value
	// bufs and shapes are the results of outputs that are pre-allocated in Go
	// memory, or copied out by a raw run; nil where onnxruntime_go returned a
	// value of its own.
	bufs   [][]byte
	shapes [][]int64
	// auto marks the outputs ORT allocates in this run.
	auto []bool
	// into are the outputs' destinations (core.ConcatBatch.Into) in session
	// order, nil where there is none or it may not be used.
	into [][]byte
	raw  []rawOutput
	// inCache and outCache are the cached values in use (see cache.go),
	// nil for values made for this run only.
	inCache, outCache []*cachedValue
	// inH and outH are the OrtValues for a direct run.
	inH, outH []unsafe.Pointer
	// inDev are the inputs ORT reads where they are, by address (a
	// client's CUDA region: core.Tensor.Device), nil elsewhere; their
	// r.inputs entry is nil.
	inDev []unsafe.Pointer
	// intoDev are the outputs' device destinations (core.ConcatBatch.IntoDevice)
	// in session order; outDev the OrtValues ORT writes there, nil where
	// an output is not written to device memory.
	intoDev []core.DeviceData
	outDev  []unsafe.Pointer
	// hasDev: an inDev or outDev value is in use; onnxruntime_go's Run
	// cannot take such OrtValues.
	hasDev bool
	// pins keeps the Go buffers that ORT tensors wrap pinned while ORT holds
	// them: cgo lets C keep a Go pointer past a call only if it is pinned.
	pins runtime.Pinner
}

func (r *runScratch) reset(nIn, nOut int) {
	r.inputs = resize(r.inputs, nIn)
	r.outputs = resize(r.outputs, nOut)
	r.bufs = resize(r.bufs, nOut)
	r.shapes = resize(r.shapes, nOut)
	r.auto = resize(r.auto, nOut)
	r.into = resize(r.into, nOut)
	r.raw = resize(r.raw, nOut)
	r.inCache = resize(r.inCache, nIn)
	r.outCache = resize(r.outCache, nOut)
	r.inH = resize(r.inH, nIn)
	r.outH = resize(r.outH, nOut)
	r.inDev = resize(r.inDev, nIn)
	r.hasDev = false
	r.intoDev = resize(r.intoDev, nOut)
	r.outDev = resize(r.outDev, nOut)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// release destroys every value and drops references to results.
func (r *runScratch) release() {
	defer r.pins.Unpin()
	for i, v := range r.inputs {
		if r.inDev[i] != nil {
			releaseValue(r.inDev[i])
		} else if r.inCache[i] == nil {
			destroy(v)
		}
		r.inputs[i], r.inCache[i], r.inDev[i] = nil, nil, nil
	}
	for i, v := range r.outputs {
		if r.outDev[i] != nil {
			releaseValue(r.outDev[i])
		} else if r.outCache[i] == nil {
			destroy(v)
		}
		r.outputs[i], r.bufs[i], r.shapes[i], r.raw[i], r.outCache[i], r.into[i] = nil, nil, nil, rawOutput{}, nil, nil
		r.intoDev[i], r.outDev[i] = nil, nil
	}
}

// Execute runs one batch. Small fixed-size tensors (up to
// smallTensorBytes) use the instance's cached ORT values: inputs are copied
// in, outputs copied out (cache.go). Larger inputs are wrapped without
// copying, and larger outputs whose shape is known in advance (fixed graph
// dims, the batch dim from the inputs) are pre-allocated in Go memory that
// ORT writes into and that becomes the result. The rest are allocated by ORT
// and copied once. An output with a destination (core.ConcatBatch.Into, set for
// a batch of one request) goes there instead of Go memory: ORT writes it in
// place when its shape is known in advance and it is not cached, and
// the raw run copies it there from ORT's allocation otherwise; the result
// is then a prefix of the destination.
//
// onnxruntime_go copies ORT-allocated FLOAT16/BFLOAT16 outputs short (one
// byte per element instead of two, which then fails), so a batch with such
// an output of unknown shape runs through the ORT C API directly (runRaw),
// which copies every ORT-allocated output itself.
func (in *instance) Execute(ctx context.Context, b *core.ConcatBatch) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	b.ComputeStart = time.Now()
	if in.closed {
		return core.Errorf(core.CodeUnavailable, "instance '%s' of model '%s' is closed", in.name, in.model)
	}
	if err := ctx.Err(); err != nil {
		return cancelled(in.model, err)
	}
	r := &in.scratch
	r.reset(len(in.inputs), len(in.outputs))
	defer r.release()

	batch, err := in.setInputs(r, b.Inputs)
	if err != nil {
		return err
	}
	in.destinations(r, b)
	raw, err := in.allocOutputs(r, batch)
	if err != nil {
		return err
	}
	b.InferStart = time.Now()
	if err := in.run(ctx, r, raw); err != nil {
		return err
	}
	b.InferEnd = time.Now()
	if b.Results, err = in.results(r, b.Outputs); err != nil {
		return err
	}
	b.ComputeEnd = time.Now()
	return nil
}

// setInputs wraps the batch's tensors in session input order and returns
// the batch size (the first dim of the inputs for a batching model).
func (in *instance) setInputs(r *runScratch, inputs []*core.Tensor) (int64, error) {
	batch := int64(-1)
	for pos, t := range inputs {
		i := pos
		if i >= len(in.inputs) || in.inputs[i].name != t.Name {
			var ok bool
			if i, ok = in.inputIdx[t.Name]; !ok {
				return 0, core.Errorf(core.CodeInvalidArg, "unexpected inference input '%s' for model '%s'", t.Name, in.model)
			}
		}
		if r.inputs[i] != nil || r.inDev[i] != nil {
			return 0, core.Errorf(core.CodeInvalidArg, "input '%s' given twice", t.Name)
		}
		if t.Device != nil {
			h, err := in.deviceInput(&in.inputs[i], t)
			if err != nil {
				return 0, err
			}
			r.inDev[i] = h
			r.hasDev = true
			if batch < 0 && in.maxBatch > 0 && len(t.Shape) > 0 {
				batch = t.Shape[0]
			}
			continue
		}
		c, err := in.cachedInput(i, t)
		if err != nil {
			return 0, err
		}
		var v ort.Value
		if c != nil {
			r.inCache[i], v = c, c.val
		} else if v, err = newInput(&in.inputs[i], t, &r.pins); err != nil {
			return 0, err
		}
		r.inputs[i] = v
		if batch < 0 && in.maxBatch > 0 && len(t.Shape) > 0 {
			batch = t.Shape[0]
		}
	}
	for i, v := range r.inputs {
		if v == nil && r.inDev[i] == nil {
			return 0, core.Errorf(core.CodeInvalidArg, "expected input '%s' for model '%s' is missing", in.inputs[i].name, in.model)
		}
	}
	return batch, nil
}

// destinations fills r.into from b.Into: the fixed-size outputs'
// destinations that overlap no input (ORT's kernels do not expect an
// output to alias an input).
func (in *instance) destinations(r *runScratch, b *core.ConcatBatch) {
	for k, dst := range b.IntoDevice {
		if dst == nil || k >= len(b.Outputs) {
			continue
		}
		if i, ok := in.outputIdx[b.Outputs[k]]; ok && in.outputs[i].dtype != core.TypeBytes && len(in.outputs[i].dims) > 0 {
			r.intoDev[i] = dst
		}
	}
	for k, dst := range b.Into {
		if len(dst) == 0 || k >= len(b.Outputs) {
			continue
		}
		i, ok := in.outputIdx[b.Outputs[k]]
		if !ok || in.outputs[i].dtype == core.TypeBytes || len(in.outputs[i].dims) == 0 {
			continue
		}
		if !slices.ContainsFunc(b.Inputs, func(t *core.Tensor) bool { return core.Overlap(t.Data, dst) }) {
			r.into[i] = dst
		}
	}
}

// allocOutputs pre-allocates every fixed-size output whose shape follows
// from the graph and the batch size, and every scalar. It reports whether
// an FP16/BF16 output is left to ORT, which calls for a raw run.
func (in *instance) allocOutputs(r *runScratch, batch int64) (raw bool, err error) {
	for i := range in.outputs {
		s := &in.outputs[i]
		if s.dtype == core.TypeBytes {
			continue // ORT allocates strings
		}
		if len(s.dims) == 0 {
			v, err := newScalarOutput(s.dtype)
			if err != nil {
				return false, core.Errorf(core.CodeInternal, "output '%s': %v", s.name, err)
			}
			r.outputs[i] = v
			continue
		}
		if !s.shapeKnown() || s.batched && batch < 0 {
			// ORT allocates; the raw run copies into a destination.
			raw = raw || s.half || r.into[i] != nil
			continue
		}
		if d := r.intoDev[i]; d != nil {
			shape := append([]int64(nil), s.dims...)
			if s.batched {
				shape[0] = batch
			}
			if n := core.ElementCount(shape) * int64(s.dtype.ByteSize()); n > 0 && int64(d.Size()) >= n {
				v, err := tensorAt(d, shape, s.onnx)
				if err != nil {
					return false, core.Errorf(core.CodeInternal, "output '%s' in device memory: %v", s.name, err)
				}
				r.outDev[i], r.shapes[i] = v, shape
				r.hasDev = true
				continue
			}
			r.intoDev[i] = nil // too small or empty: returned in host memory
		}
		c, err := in.cachedOutput(i, batch)
		if err != nil {
			return false, err
		}
		if c != nil {
			r.outputs[i], r.outCache[i] = c.val, c
			continue
		}
		shape := append([]int64(nil), s.dims...)
		if s.batched {
			shape[0] = batch
		}
		n := core.ElementCount(shape) * int64(s.dtype.ByteSize())
		buf := r.into[i]
		if n == 0 || int64(len(buf)) < n {
			buf = make([]byte, max(n, 1))
		}
		r.pins.Pin(&buf[0]) // does nothing for memory outside Go's heap (a mapping)
		v, err := ort.NewCustomDataTensor(ort.Shape(shape), buf, s.onnx)
		if err != nil {
			return false, core.Errorf(core.CodeInternal, "output '%s' of shape %s: %v", s.name, core.ShapeString(shape), err)
		}
		r.outputs[i], r.bufs[i], r.shapes[i] = tracked(v), buf[:n], shape
	}
	return raw, nil
}

// run runs the session once, honouring ctx through RunOptions.Terminate.
func (in *instance) run(ctx context.Context, r *runScratch, raw bool) error {
	watched := in.watchRun(ctx)
	direct := !raw
	for i, v := range r.outputs {
		r.auto[i] = v == nil && r.outDev[i] == nil
		direct = direct && !r.auto[i]
	}
	// onnxruntime_go's Run takes only its own values, not the OrtValues of
	// tensors in device memory: those go through the raw run.
	raw = raw || (!direct && r.hasDev)
	var err error
	if direct {
		// Every value exists: run on their OrtValues, which costs no
		// allocation (onnxruntime_go's Run allocates per value).
		if err = in.handles(r); err == nil {
			err = runValues(in.session, in.runOpts, in.inNames, in.outNames, r.inH, r.outH)
		}
	} else if raw {
		if err = in.handles(r); err == nil {
			err = runRaw(in.session, in.runOpts, in.inNames, in.outNames, r.inH, r.outH, r.auto, in.elemSizes, r.into, r.raw)
		}
	} else {
		err = in.session.RunWithOptions(r.inputs, r.outputs, in.runOpts)
	}
	if watched {
		in.unwatch()
	}
	for i, v := range r.outputs {
		switch {
		case !r.auto[i]:
		case raw:
			if r.raw[i].shape != nil {
				r.shapes[i], r.bufs[i] = r.raw[i].shape, r.raw[i].data
				if r.bufs[i] == nil {
					r.bufs[i] = []byte{}
				}
			}
		case v == nil:
		case err != nil && reflect.ValueOf(v).IsNil():
			// A conversion that failed inside onnxruntime_go leaves a typed nil.
			r.outputs[i] = nil
		default:
			tracked(v)
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cancelled(in.model, cerr)
		}
		return core.Errorf(core.CodeInternal, "onnx runtime error: model '%s': %v", in.model, err)
	}
	return nil
}

// handles fills r.inH and r.outH.
func (in *instance) handles(r *runScratch) error {
	if err := in.inputHandles(r); err != nil {
		return err
	}
	var err error
	for i, v := range r.outputs {
		switch {
		case r.outDev[i] != nil:
			r.outH[i] = r.outDev[i]
		case r.outCache[i] != nil:
			r.outH[i] = r.outCache[i].handle
		case v == nil:
			r.outH[i] = nil // ORT allocates it (a raw run)
		default:
			if r.outH[i], err = valueHandle(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadsDevice reports whether the instance reads inputs held in device
// id's memory in place (core.DeviceReader): a KIND_GPU instance its own
// GPU's, through the CUDA provider; any instance host memory (-1).
func (in *instance) ReadsDevice(id int64) bool {
	return id == -1 || (in.gpu && id == int64(in.device))
}

// deviceInput wraps an input held by address (t.Device) as an OrtValue.
func (in *instance) deviceInput(s *inputSlot, t *core.Tensor) (unsafe.Pointer, error) {
	if t.DataType != s.dtype {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' has datatype %s, model expects %s", s.name, t.DataType, s.dtype)
	}
	n := core.ElementCount(t.Shape) * int64(t.DataType.ByteSize())
	if s.scalar || t.DataType == core.TypeBytes || len(t.Shape) == 0 || n <= 0 || int64(t.Device.Size()) < n {
		return nil, core.Errorf(core.CodeInvalidArg, "input '%s' of shape %s cannot be read in device memory of %d bytes", s.name, core.ShapeString(t.Shape), t.Device.Size())
	}
	v, err := tensorAt(t.Device, t.Shape, s.onnx)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "input '%s' in device memory: %v", s.name, err)
	}
	return v, nil
}

// inputHandles fills r.inH with the inputs' OrtValues.
func (in *instance) inputHandles(r *runScratch) error {
	var err error
	for i, v := range r.inputs {
		switch {
		case r.inDev[i] != nil:
			r.inH[i] = r.inDev[i]
		case r.inCache[i] != nil:
			r.inH[i] = r.inCache[i].handle
		default:
			if r.inH[i], err = valueHandle(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// results converts the named outputs into core tensors. Cached outputs are
// copied out, since the next run reuses their buffers; the copies, like the
// tensors, share one allocation per batch.
func (in *instance) results(r *runScratch, names []string) ([]*core.Tensor, error) {
	var size, rank int
	for _, name := range names {
		if i, ok := in.outputIdx[name]; ok && r.outCache[i] != nil {
			size += len(r.outCache[i].buf)
			rank += len(r.outCache[i].shape)
		}
	}
	data, dims := make([]byte, size), make([]int64, rank)
	tensors, res := make([]core.Tensor, len(names)), make([]*core.Tensor, len(names))
	for k, name := range names {
		t := &tensors[k]
		res[k] = t
		i, ok := in.outputIdx[name]
		if !ok {
			return nil, core.Errorf(core.CodeInvalidArg, "unexpected inference output '%s' for model '%s'", name, in.model)
		}
		c := r.outCache[i]
		if c == nil {
			if err := in.result(r, i, t); err != nil {
				return nil, err
			}
			continue
		}
		n, d := len(c.buf), len(c.shape)
		t.Name, t.DataType = name, in.outputs[i].dtype
		t.Data, data = data[:n:n], data[n:]
		t.Shape, dims = dims[:d:d], dims[d:]
		copy(t.Data, c.buf)
		copy(t.Shape, c.shape)
	}
	return res, nil
}

// result converts output i into t.
func (in *instance) result(r *runScratch, i int, t *core.Tensor) error {
	s := &in.outputs[i]
	name := s.name
	t.Name, t.DataType = name, s.dtype
	v := r.outputs[i]
	var err error
	switch {
	case r.outDev[i] != nil:
		t.Shape, t.Device = r.shapes[i], r.intoDev[i]
	case r.bufs[i] != nil:
		t.Shape, t.Data = r.shapes[i], r.bufs[i]
		if len(t.Shape) == 0 {
			t.Shape = append([]int64{}, s.scalarShape...)
		}
		return nil
	case v == nil:
		return core.Errorf(core.CodeInternal, "output '%s' was not produced", name)
	case len(s.dims) == 0 && s.dtype != core.TypeBytes:
		t.Shape = append([]int64{}, s.scalarShape...)
		t.Data, err = scalarBytes(v)
	case s.dtype == core.TypeBytes:
		st, ok := v.(*ort.StringTensor)
		if !ok {
			return core.Errorf(core.CodeInternal, "output '%s': unexpected value %T", name, v)
		}
		t.Shape = v.GetShape()
		scalar := len(t.Shape) == 0
		if scalar {
			t.Shape = append([]int64{}, s.scalarShape...)
		}
		t.Data, err = stringBytes(st, scalar)
	default:
		t.Shape = v.GetShape()
		t.Data, err = tensorBytes(v)
	}
	if err != nil {
		return core.Errorf(core.CodeInternal, "output '%s': %v", name, err)
	}
	return nil
}

// cancelled reports a run stopped by its context, matching both the core's
// error class and errors.Is(err, context.Canceled).
func cancelled(model string, cause error) error {
	code := core.CodeCancelled
	if errors.Is(cause, context.DeadlineExceeded) {
		code = core.CodeUnavailable
	}
	return fmt.Errorf("%w: %w", core.Errorf(code, "inference of model '%s' stopped", model), cause)
}
