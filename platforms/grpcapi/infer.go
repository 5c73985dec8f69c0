package grpcapi

import (
	"context"
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/repo/modelconfig"
)

// errDecoupled is ModelInfer's refusal of a decoupled model.
var errDecoupled = core.Errorf(core.CodeUnsupported, "ModelInfer RPC doesn't support models with decoupled transaction policy")

// ModelInfer runs one inference: converted and rendered here, run by the
// pipeline (platforms/infer) in Triton's order (triton-inference-server/server
// src/grpc/infer_handler.cc, ModelInferHandler::Process and Execute).
// The call's context is the request's: a cancelled call or a passed
// deadline takes the request out of the queue.
func (s *Server) ModelInfer(ctx context.Context, in *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	return s.modelInfer(ctx, plainRequest(in))
}

// modelInfer is ModelInfer of a request as the codec read it.
func (s *Server) modelInfer(ctx context.Context, in *wireRequest) (out *pb.ModelInferResponse, err error) {
	var conv converted
	var report infer.Report
	if s.opts.LoadReports != nil {
		report = func(mv *core.ModelVersion) { s.opts.LoadReports.SetTrailer(ctx, mv) }
	}
	render := func(resp *core.InferResponse, rerr error) {
		if rerr == nil {
			if out, rerr = inferResponse(resp, conv.regions); rerr == nil {
				rerr = checkResponseSize(out)
			}
		}
		if rerr != nil {
			out, err = nil, statusError(rerr)
		}
	}
	if call, ok := s.inferCall(in, errDecoupled, "ModelInfer", render); ok {
		s.pipe.Run(ctx, &call, s.decoder(in, &conv), infer.Reply{Report: report, Render: render}, nil)
	}
	return out, err
}

// converted is what a request's conversion leaves its rendering:
// triton_enable_empty_final_response, which only ModelStreamInfer uses,
// and the request's outputs in shared memory (nil: none), held until the
// call ends.
type converted struct {
	emptyFinal bool
	regions    *outputRegions
}

// inferCall is the pipeline's call for request w of method (ModelInfer
// or ModelStreamInfer); decoupled, when set, refuses a decoupled model.
// The version string is gRPC's to parse: a bad one is rendered, and ok is
// false.
func (s *Server) inferCall(w *wireRequest, decoupled error, method string, render func(*core.InferResponse, error)) (call infer.Call, ok bool) {
	version, err := protocol.ParseVersion(w.msg.GetModelVersion())
	if err != nil {
		render(nil, err)
		return call, false
	}
	return infer.Call{
		Protocol: infer.GRPC, Route: method, Model: w.msg.GetModelName(), Version: version,
		Decoupled: decoupled, Meta: callMetadata{}, Buffered: true,
	}, true
}

// decoder converts w for the pipeline, leaving what its rendering needs in
// conv. A request the codec refused unread fails where its conversion
// would have failed.
func (s *Server) decoder(w *wireRequest, conv *converted) infer.Decoder {
	return func(_ *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		if w.refused != nil {
			return nil, nil, w.refused
		}
		req, emptyFinal, regions, err := wireInferRequest(w, fh, s.opts.SharedMemory)
		conv.emptyFinal, conv.regions = emptyFinal, regions
		return req, regions.held(), err
	}
}

// callMetadata is a call's incoming metadata, which its context holds, as
// the pipeline reads it: without a copy unless headers are forwarded, and
// without an allocation to hand it over (the type is empty).
type callMetadata struct{}

func (callMetadata) Carrier(ctx context.Context) propagation.TextMapCarrier { return mdCarrier{ctx} }

func (callMetadata) Headers(ctx context.Context) map[string][]string {
	md, _ := metadata.FromIncomingContext(ctx)
	return md
}

// checkResponseSize refuses a response that no gRPC message can carry
// (INT32_MAX bytes), with Triton's text (triton-inference-server/server
// src/grpc/infer_handler.h). Only responses whose tensors
// come near the limit are measured.
func checkResponseSize(out *pb.ModelInferResponse) error {
	raw := 0
	for _, b := range out.GetRawOutputContents() {
		raw += len(b)
	}
	if raw < math.MaxInt32-(1<<20) {
		return nil
	}
	if n := proto.Size(out); n > math.MaxInt32 {
		return invalidArg("Response has byte size %d which exceeds gRPC's byte size limit %d.", n, math.MaxInt32)
	}
	return nil
}

func invalidArg(format string, args ...any) error {
	return core.Errorf(core.CodeInvalidArg, format, args...)
}

// inferParams applies typed protobuf request parameters to req by gRPC's
// rules, keys in sorted order so that the first bad one is always the
// same, and returns triton_enable_empty_final_response.
func inferParams(in map[string]*pb.InferParameter, req *core.InferRequest) (emptyFinal bool, err error) {
	if len(in) == 0 {
		return false, nil // most requests: no sort, no allocation
	}
	r := protocol.ParamReader{Rules: protocol.GRPCRules, Request: req}
	if len(in) == 1 {
		for k, p := range in {
			if err := r.Read(k, inferParam(p)); err != nil {
				return false, err
			}
		}
		return r.EmptyFinalResponse, nil
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if err := r.Read(k, inferParam(in[k])); err != nil {
			return false, err
		}
	}
	return r.EmptyFinalResponse, nil
}

func inferParam(p *pb.InferParameter) protocol.Param {
	switch c := p.GetParameterChoice().(type) {
	case *pb.InferParameter_BoolParam:
		return protocol.Param{Kind: protocol.ParamBool, Bool: c.BoolParam}
	case *pb.InferParameter_Int64Param:
		return protocol.Param{Kind: protocol.ParamInt64, Int64: c.Int64Param}
	case *pb.InferParameter_StringParam:
		return protocol.Param{Kind: protocol.ParamString, String: c.StringParam}
	case *pb.InferParameter_DoubleParam:
		return protocol.Param{Kind: protocol.ParamDouble, Double: c.DoubleParam}
	case *pb.InferParameter_Uint64Param:
		return protocol.Param{Kind: protocol.ParamUint64, Uint64: c.Uint64Param}
	}
	return protocol.Param{}
}

// inferRequest converts a ModelInferRequest into a core request, in the
// order of Triton's ModelInferHandler::Execute (triton-inference-server/server
// src/grpc/infer_handler.cc): request id and parameters, inputs and outputs,
// forwarded headers, input data, output options (the core validates the
// rest); fh (nil: none) are the headers it forwards, regions the
// shared-memory regions tensors may name (nil: none). Raw input contents
// become tensor data without a copy; inputs in shared memory are read in
// place from a guarded region (held in outs like the outputs' regions),
// copied out of any other. emptyFinal is the request's
// triton_enable_empty_final_response, which only ModelStreamInfer uses;
// outs are the regions in use, held until the caller releases them (nil:
// none; on an error nothing is held).
func inferRequest(in *pb.ModelInferRequest, fh *protocol.ForwardedHeaders, regions *shm.Manager) (req *core.InferRequest, emptyFinal bool, outs *outputRegions, err error) {
	return wireInferRequest(plainRequest(in), fh, regions)
}

// wireInferRequest is inferRequest of a request as the codec read it, its
// bytes_contents flattened.
func wireInferRequest(w *wireRequest, fh *protocol.ForwardedHeaders, regions *shm.Manager) (req *core.InferRequest, emptyFinal bool, outs *outputRegions, err error) {
	req, emptyFinal, outs, err = convertRequest(w, fh, regions)
	if err != nil {
		outs.held().Release()
		return nil, false, nil, err
	}
	return req, emptyFinal, outs, nil
}

// convertRequest is inferRequest before its error path's release: outs
// holds whatever regions were taken when it fails.
func convertRequest(w *wireRequest, fh *protocol.ForwardedHeaders, regions *shm.Manager) (req *core.InferRequest, emptyFinal bool, outs *outputRegions, err error) {
	in := w.msg
	model := in.GetModelName()
	req = &core.InferRequest{ID: in.GetId(), ModelName: model, ModelVersion: core.LatestVersion}
	if emptyFinal, err = inferParams(in.GetParameters(), req); err != nil {
		return nil, false, nil, err
	}

	inputs := in.GetInputs()
	req.Inputs = make([]*core.Tensor, len(inputs))
	tensors := make([]core.Tensor, len(inputs)) // one allocation for all inputs
	var seen protocol.Names
	for i, t := range inputs {
		if seen.Add(t.GetName()) {
			return nil, false, outs, protocol.DuplicateInput(req.ID, t.GetName())
		}
		tensors[i] = core.Tensor{Name: t.GetName(), DataType: core.ParseDataType(t.GetDatatype()), Shape: t.GetShape()}
		req.Inputs[i] = &tensors[i]
	}
	if requested := in.GetOutputs(); len(requested) > 0 {
		req.Outputs = make([]core.RequestedOutput, len(requested))
		var seen protocol.Names
		for i, o := range requested {
			if seen.Add(o.GetName()) {
				return nil, false, outs, protocol.DuplicateOutput(o.GetName())
			}
			req.Outputs[i].Name = o.GetName()
		}
	}
	if fh != nil {
		if err := fh.Apply(req); err != nil {
			return nil, false, outs, err
		}
	}

	raw := in.GetRawInputContents()
	next := 0
	for i, t := range inputs {
		ref, err := sharedMemoryParams(t.GetName(), t.GetParameters())
		if err != nil {
			return nil, false, outs, err
		}
		if ref.set {
			if t.GetContents() != nil {
				return nil, false, outs, invalidArg("unexpected 'content' provided when using shared memory for input tensor '%s' for model '%s'", t.GetName(), model)
			}
			if err = regionInput(req.Inputs[i], regions, ref, &outs); err != nil {
				return nil, false, outs, err
			}
			continue
		}
		switch {
		case t.GetContents() != nil:
			if len(raw) > 0 {
				return nil, false, outs, invalidArg("contents field must not be specified when using raw_input_contents for '%s' for model '%s'", t.GetName(), model)
			}
			data, err := typedContents(t, model, w.flat(i))
			if err != nil {
				return nil, false, outs, err
			}
			req.Inputs[i].Data = data
		case next < len(raw):
			req.Inputs[i].Data = raw[next]
			next++
		default:
			return nil, false, outs, invalidArg("unable to find data for input tensor '%s' for model '%s' in request.", t.GetName(), model)
		}
	}

	// Triton's InferAllocatorPayload (src/grpc/infer_handler.h): the
	// shared-memory parameters, the classification, the pair refused,
	// then the region held.
	for i, o := range in.GetOutputs() {
		p := o.GetParameters()
		ref, err := sharedMemoryParams(o.GetName(), p)
		if err != nil {
			return nil, false, outs, err
		}
		class, hasClass := p["classification"]
		if hasClass {
			if req.Outputs[i].ClassCount, err = protocol.ClassCount(inferParam(class)); err != nil {
				return nil, false, outs, err
			}
		}
		if ref.set && hasClass {
			return nil, false, outs, invalidArg("output can't set both 'shared_memory_region' and 'classification'")
		}
		if ref.set {
			span, err := regions.Acquire(ref.name, ref.offset, ref.byteSize)
			if err != nil {
				return nil, false, outs, err
			}
			if outs == nil {
				outs = &outputRegions{}
			}
			outs.add(o.GetName(), span)
			// A guarded region takes the output in place where the
			// backend can write it there.
			req.Outputs[i].Into, _ = span.Data()
			if span.Kind() == shm.CUDA {
				req.Outputs[i].IntoDevice = span // a GPU backend writes it there
			}
		}
	}
	return req, emptyFinal, outs, nil
}

// typedContents flattens an input's typed contents into the raw layout
// (triton-inference-server/server src/grpc/infer_handler.cc,
// InferGRPCToInput): every non-empty field must be the one of the
// input's datatype; 8- and 16-bit integers are truncated per element.
// flat, when not nil, holds the input's bytes_contents, which the codec
// took out of the message already flattened.
func typedContents(t *pb.ModelInferRequest_InferInputTensor, model string, flat *flatBytes) ([]byte, error) {
	c := t.GetContents()
	dt := core.ParseDataType(t.GetDatatype())
	nBytes := len(c.GetBytesContents())
	if flat != nil {
		nBytes += int(flat.n)
	}
	counts := [contentsBytes + 1]int{0, len(c.GetBoolContents()), len(c.GetIntContents()), len(c.GetInt64Contents()),
		len(c.GetUintContents()), len(c.GetUint64Contents()), len(c.GetFp32Contents()), len(c.GetFp64Contents()), nBytes}
	types := contentsTypes(dt)
	for f, n := range counts {
		if n > 0 && types[f] != dt {
			return nil, explicitTypeError(t.GetName(), model, types[f], t.GetDatatype())
		}
	}
	if dt == core.TypeBytes && flat != nil && flat.n > 0 {
		return flat.data, nil
	}
	elems := 0 // of the input's own field, which the output holds
	if f := slices.Index(types[:], dt); f > 0 {
		elems = counts[f]
	}
	out := make([]byte, 0, elems*max(dt.ByteSize(), 0))
	switch dt {
	case core.TypeBool:
		for _, v := range c.GetBoolContents() {
			b := byte(0)
			if v {
				b = 1
			}
			out = append(out, b)
		}
	case core.TypeInt8, core.TypeInt16, core.TypeInt32:
		out = appendTruncated(out, c.GetIntContents(), dt.ByteSize())
	case core.TypeInt64:
		for _, v := range c.GetInt64Contents() {
			out = binary.LittleEndian.AppendUint64(out, uint64(v))
		}
	case core.TypeUint8, core.TypeUint16, core.TypeUint32:
		out = appendTruncated(out, c.GetUintContents(), dt.ByteSize())
	case core.TypeUint64:
		for _, v := range c.GetUint64Contents() {
			out = binary.LittleEndian.AppendUint64(out, v)
		}
	case core.TypeFP32:
		for _, v := range c.GetFp32Contents() {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	case core.TypeFP64:
		for _, v := range c.GetFp64Contents() {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		}
	case core.TypeBytes:
		for _, v := range c.GetBytesContents() {
			out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		}
	}
	return out, nil
}

// appendTruncated appends each 32-bit value's low size bytes, little-endian.
func appendTruncated[T int32 | uint32](out []byte, vals []T, size int) []byte {
	for _, v := range vals {
		switch size {
		case 1:
			out = append(out, byte(v))
		case 2:
			out = binary.LittleEndian.AppendUint16(out, uint16(v))
		default:
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		}
	}
	return out
}

// inferResponse renders a core response (triton-inference-server/server
// src/grpc/infer_handler.h, InferResponseCompleteCommon): every
// output's data in raw_output_contents, at the output's index. An output
// in shared memory (regions) is written into its region and its raw
// contents are left empty, as Triton's allocator leaves them.
func inferResponse(resp *core.InferResponse, regions *outputRegions) (*pb.ModelInferResponse, error) {
	if err := regions.write(resp); err != nil {
		return nil, err
	}
	out := &pb.ModelInferResponse{
		ModelName: resp.ModelName, ModelVersion: strconv.FormatInt(resp.ModelVersion, 10), Id: resp.ID,
		Outputs:           make([]*pb.ModelInferResponse_InferOutputTensor, len(resp.Outputs)),
		RawOutputContents: make([][]byte, len(resp.Outputs)),
	}
	tensors := make([]pb.ModelInferResponse_InferOutputTensor, len(resp.Outputs)) // one allocation for all outputs
	for i, t := range resp.Outputs {
		o := &tensors[i]
		o.Name, o.Datatype, o.Shape = t.Name, t.DataType.String(), t.Shape
		out.Outputs[i] = o
		if regions.span(t.Name) == nil {
			out.RawOutputContents[i] = t.Data
		}
	}
	if len(resp.Parameters) > 0 {
		out.Parameters = make(map[string]*pb.InferParameter, len(resp.Parameters))
		for k, v := range resp.Parameters {
			p, err := responseParameter(k, v)
			if err != nil {
				return nil, err
			}
			out.Parameters[k] = p
		}
	}
	return out, nil
}

// responseParameter is one response parameter as gRPC carries it, read by
// the writer every transport shares (protocol.ResponseParam), so one core
// response reads alike over HTTP and gRPC, errors included.
func responseParameter(name string, v any) (*pb.InferParameter, error) {
	p, err := protocol.ResponseParam(name, v)
	if err != nil {
		return nil, err
	}
	var out pb.InferParameter
	switch p.Kind {
	case protocol.ParamBool:
		out.ParameterChoice = &pb.InferParameter_BoolParam{BoolParam: p.Bool}
	case protocol.ParamString:
		out.ParameterChoice = &pb.InferParameter_StringParam{StringParam: p.String}
	case protocol.ParamInt64:
		out.ParameterChoice = &pb.InferParameter_Int64Param{Int64Param: p.Int64}
	case protocol.ParamUint64:
		out.ParameterChoice = &pb.InferParameter_Uint64Param{Uint64Param: p.Uint64}
	case protocol.ParamDouble:
		out.ParameterChoice = &pb.InferParameter_DoubleParam{DoubleParam: p.Double}
	}
	return &out, nil
}
