package grpcapi

import (
	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
)

// regionRef is where a tensor's shared-memory parameters place it.
type regionRef struct {
	set      bool // shared_memory_region is given
	name     string
	offset   uint64
	byteSize uint64
}

// sharedMemoryParams reads a tensor's shared-memory parameters with the
// checks and texts of Triton's ParseSharedMemoryParams
// (triton-inference-server/server src/grpc/grpc_utils.h). Offset and byte
// size are int64 there, used as size_t: a negative one is a huge one,
// which the region's bounds check refuses.
func sharedMemoryParams(tensor string, p map[string]*pb.InferParameter) (regionRef, error) {
	var ref regionRef
	if len(p) == 0 {
		return ref, nil
	}
	if region, ok := p["shared_memory_region"]; ok {
		ref.set = true
		s, ok := region.GetParameterChoice().(*pb.InferParameter_StringParam)
		if !ok {
			return ref, invalidArg("invalid value type for 'shared_memory_region' parameter for tensor '%s', expected string_param.", tensor)
		}
		ref.name = s.StringParam
	}
	if off, ok := p["shared_memory_offset"]; ok {
		if !ref.set {
			return ref, invalidArg("'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor '%s'", tensor)
		}
		v, ok := off.GetParameterChoice().(*pb.InferParameter_Int64Param)
		if !ok {
			return ref, invalidArg("invalid value type for 'shared_memory_offset' parameter for tensor '%s', expected int64_param.", tensor)
		}
		ref.offset = uint64(v.Int64Param)
	}
	size, ok := p["shared_memory_byte_size"]
	switch {
	case ok && !ref.set:
		return ref, invalidArg("'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor '%s'", tensor)
	case ok:
		v, ok := size.GetParameterChoice().(*pb.InferParameter_Int64Param)
		if !ok {
			return ref, invalidArg("invalid value type for 'shared_memory_byte_size' parameter for tensor '%s', expected int64_param.", tensor)
		}
		ref.byteSize = uint64(v.Int64Param)
	case ref.set:
		return ref, invalidArg("'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '%s'", tensor)
	}
	return ref, nil
}

// regionInput points t at its bytes in their region
// (shm.Manager.InputTensor), the span held in *outs until the call ends
// when they are read in place.
func regionInput(t *core.Tensor, regions *shm.Manager, ref regionRef, outs **outputRegions) error {
	held, err := regions.InputTensor(t, ref.name, ref.offset, ref.byteSize)
	if held != nil {
		if *outs == nil {
			*outs = &outputRegions{}
		}
		(*outs).holds.AddInput(held)
	}
	return err
}

// outputRegions are the regions one request uses, held from the decode
// until the call ends: its outputs written to shared memory, and its
// inputs read in place. A nil value has none.
type outputRegions struct {
	holds shm.Holds
	names []string
	spans []*shm.Span
}

// add holds span for output name.
func (o *outputRegions) add(name string, span *shm.Span) {
	o.holds.Add(span)
	o.names = append(o.names, name)
	o.spans = append(o.spans, span)
}

// span is the region output name goes to; nil when it is not in one.
func (o *outputRegions) span(name string) *shm.Span {
	if o == nil {
		return nil
	}
	for i, n := range o.names {
		if n == name {
			return o.spans[i]
		}
	}
	return nil
}

// held is what the pipeline releases when the call ends.
func (o *outputRegions) held() *shm.Holds {
	if o == nil {
		return nil
	}
	return &o.holds
}

// write copies resp's outputs that go to shared memory into their regions
// (protocol.WriteRegions; Triton's response allocator refuses a region too
// small: ResponseAllocatorHelper in triton-inference-server/server
// src/grpc/infer_handler.cc).
func (o *outputRegions) write(resp *core.InferResponse) error {
	if o == nil {
		return nil
	}
	return protocol.WriteRegions(resp.Outputs, o.span)
}
