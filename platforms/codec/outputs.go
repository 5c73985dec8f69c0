package codec

import (
	"context"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// The requested outputs of an infer request's JSON header, and the
// shared-memory references of its inputs and outputs.

// sharedMemoryRef places a tensor in a registered shared-memory region
// (triton-inference-server/server docs/protocol/extension_shared_memory.md).
type sharedMemoryRef struct {
	Region   string
	Offset   uint64
	ByteSize uint64
}

// parseSharedMemory reads shared_memory_region / _offset / _byte_size.
func parseSharedMemory(params tritonjson.Value) (sharedMemoryRef, error) {
	var ref sharedMemoryRef
	if v, ok := params.Find("shared_memory_region"); ok {
		s, err := v.CString()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_region'", err)
		}
		ref.Region = s
	}
	if v, ok := params.Find("shared_memory_offset"); ok {
		u, err := v.Uint64()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_offset'", err)
		}
		ref.Offset = u
	}
	if v, ok := params.Find("shared_memory_byte_size"); ok {
		u, err := v.Uint64()
		if err != nil {
			return ref, wrap("Unable to parse 'shared_memory_byte_size'", err)
		}
		ref.ByteSize = u
	}
	return ref, nil
}

// outputs decodes the optional "outputs" array.
func (d *decoder) outputs(ctx context.Context, root tritonjson.Value) error {
	if !root.Has("outputs") {
		return nil
	}
	arr, err := root.MemberArray("outputs")
	if err != nil {
		return wrap("Unable to parse 'outputs'", err)
	}
	n := arr.Len()
	if n == 0 {
		return nil
	}
	req := d.r.Request
	req.Outputs = make([]core.RequestedOutput, 0, n)
	kinds := make([]OutputKind, 0, n)
	var names protocol.Names
	for i, o := range arr.Elements() {
		if err := alive(ctx, i); err != nil {
			return err
		}
		params, hasParams := o.Find("parameters")
		if hasParams && params.Has("shared_memory_region") {
			if params.Has("classification") {
				return invalidArg("Output can't set both 'shared_memory_region' and 'classification'")
			}
			if v, ok := params.Find("binary_data"); ok {
				b, err := v.Bool()
				if err != nil {
					return wrap("Unable to set 'binary_data'", err)
				}
				if b {
					return invalidArg("Output can't set both 'shared_memory_region' and 'binary_data'")
				}
			}
		}
		nb, err := o.MemberString("name")
		if err != nil {
			return wrap("Unable to parse 'name'", err)
		}
		out := core.RequestedOutput{Name: cstring(nb)}
		if names.Add(out.Name) {
			return protocol.DuplicateOutput(out.Name)
		}
		if v, ok := params.Find("classification"); ok {
			k, err := v.Uint64()
			if err != nil {
				return wrap("Unable to set 'classification'", err)
			}
			out.ClassCount = k
		}
		if hasParams && params.Has("shared_memory_region") {
			ref, err := parseSharedMemory(params)
			if err != nil {
				return err
			}
			span, err := d.regions.Acquire(ref.Region, ref.Offset, ref.ByteSize)
			if err != nil {
				return err
			}
			d.r.Holds.Add(span)
			if d.r.spans == nil {
				d.r.spans = make([]*shm.Span, n)
			}
			// A guarded region takes the output in place where the
			// backend can write it there.
			out.Into, _ = span.Data()
			if span.Kind() == shm.CUDA {
				out.IntoDevice = span // a GPU backend writes it there
			}
			d.r.spans[len(req.Outputs)] = span
			req.Outputs = append(req.Outputs, out)
			kinds = append(kinds, OutputSharedMemory)
			continue
		}
		kind := OutputJSON
		if v, ok := params.Find("binary_data"); ok {
			b, err := v.Bool()
			if err != nil {
				return wrap("Unable to parse 'binary_data'", err)
			}
			if b {
				kind = OutputBinary
			}
		}
		req.Outputs = append(req.Outputs, out)
		kinds = append(kinds, kind)
	}
	d.r.Kinds = kinds
	return nil
}
