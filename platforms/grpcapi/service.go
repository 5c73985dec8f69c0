package grpcapi

import (
	"context"
	"slices"

	"google.golang.org/grpc"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// serviceDesc is inference.GRPCInferenceService as generated, but for
// the handlers of ModelInfer and ModelStreamInfer, which have the server's
// codec decode their requests into a wireRequest (unmarshalWireRequest)
// instead of a ModelInferRequest.
func serviceDesc() *grpc.ServiceDesc {
	desc := pb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	desc.Streams = slices.Clone(desc.Streams)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ModelInfer" {
			desc.Methods[i].Handler = modelInferHandler
		}
	}
	for i := range desc.Streams {
		if desc.Streams[i].StreamName == "ModelStreamInfer" {
			desc.Streams[i].Handler = modelStreamInferHandler
		}
	}
	return &desc
}

// modelInferHandler is the generated handler of ModelInfer with a
// wireRequest. Interceptors see its ModelInferRequest: the whole message,
// but for inputs' bytes_contents (held aside, flattened) and for a request
// refused before it was decoded (its model name, version and id alone).
// An interceptor that hands on another message has it served as
// ModelInfer serves it.
func modelInferHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*Server)
	w := new(wireRequest)
	if err := dec(w); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.modelInfer(ctx, w)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.GRPCInferenceService_ModelInfer_FullMethodName}
	return interceptor(ctx, w.msg, info, func(ctx context.Context, req any) (any, error) {
		if in, _ := req.(*pb.ModelInferRequest); in != w.msg {
			return s.ModelInfer(ctx, in)
		}
		return s.modelInfer(ctx, w)
	})
}

// modelStreamInferHandler is the generated handler of ModelStreamInfer
// with wireRequests. A stream interceptor of the embedding program's, set
// between streamGuard and this handler, may read each request as the
// generated type, as grpc-go's own handler hands it over: then requests
// are decoded as ModelInferRequests, after the codec's scan, which refuses
// them out of band (the stream ends) instead of in-band.
func modelStreamInferHandler(srv any, stream grpc.ServerStream) error {
	recv := func() (*wireRequest, error) {
		w := new(wireRequest)
		return w, stream.RecvMsg(w)
	}
	if _, own := stream.(guardedStream); !own {
		recv = func() (*wireRequest, error) {
			m := new(pb.ModelInferRequest)
			return plainRequest(m), stream.RecvMsg(m)
		}
	}
	send := func(r *pb.ModelStreamInferResponse) error { return stream.SendMsg(r) }
	return srv.(*Server).serveStream(stream.Context(), recv, send)
}

// guardedStream is the stream streamGuard hands on; the handler that gets
// it knows that no other interceptor reads its messages.
type guardedStream struct{ grpc.ServerStream }
