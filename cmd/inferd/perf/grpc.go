package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// grpcProtocol is the KServe v2 gRPC protocol (Triton's
// inference.GRPCInferenceService): ModelInfer, or with --streaming one
// ModelStreamInfer stream per sender. Every sender shares one channel, as
// perf_analyzer's do by default.
type grpcProtocol struct {
	o      *options
	cc     *grpc.ClientConn
	client pb.GRPCInferenceServiceClient
	reqs   []*pb.ModelInferRequest
}

func newGRPCProtocol(o *options) (*grpcProtocol, error) {
	// The windows, buffers and message limits of inferd's own Go client
	// (grpcapi.DialOptions): with grpc-go's default 64 KiB windows, flow
	// control, not the server, would set large tensors' throughput. Infer
	// calls still go through timingCodec, which each call forces.
	cc, err := grpc.NewClient(o.baseURL, grpcapi.DialOptions()...)
	if err != nil {
		return nil, usagef("-u %q: %v", o.baseURL, err)
	}
	return &grpcProtocol{o: o, cc: cc, client: pb.NewGRPCInferenceServiceClient(cc)}, nil
}

// unreachable tells a connection failure from an answer of the server.
func unreachable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

func (g *grpcProtocol) model(ctx context.Context) (*modelInfo, error) {
	meta, err := g.client.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: g.o.model, Version: g.o.version})
	if err != nil {
		if unreachable(err) {
			return nil, fmt.Errorf("cannot reach the server at %s: %w", g.o.baseURL, err)
		}
		return nil, fmt.Errorf("model %q: %w", g.o.model, err)
	}
	info := &modelInfo{name: g.o.model}
	for _, t := range meta.GetInputs() {
		info.inputs = append(info.inputs, tensorMeta{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
	}
	for _, t := range meta.GetOutputs() {
		info.outputs = append(info.outputs, tensorMeta{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
	}
	if len(info.inputs) == 0 {
		return nil, fmt.Errorf("model %q: the metadata lists no inputs", g.o.model)
	}
	cfg, err := g.client.ModelConfig(ctx, &pb.ModelConfigRequest{Name: g.o.model, Version: g.o.version})
	if err != nil {
		if unreachable(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("model %q config: %w", g.o.model, err)
		}
		info.noConfig = true // as over HTTP: a server without the config extension
	}
	info.maxBatch = int(cfg.GetConfig().GetMaxBatchSize())
	info.responseCache = cfg.GetConfig().GetResponseCache().GetEnable()
	for _, st := range cfg.GetConfig().GetEnsembleScheduling().GetStep() {
		info.addComposing(st.GetModelName(), st.GetModelVersion())
	}
	if err := info.stripBatch(); err != nil {
		return nil, err
	}
	return info, nil
}

// prepare builds ModelInferRequests carrying the tensors in
// raw_input_contents, whose layout is the tool's wire encoding (BYTES
// elements with their 4-byte length prefix). No outputs are named: the
// server returns them all.
func (g *grpcProtocol) prepare(info *modelInfo, sets [][]tensorData, shm *shmLayout) error {
	g.reqs = make([]*pb.ModelInferRequest, 0, len(sets))
	for k, tensors := range sets {
		if len(tensors) != len(info.inputs) {
			return errors.New("internal error: inputs and tensors differ in number")
		}
		r := &pb.ModelInferRequest{ModelName: g.o.model, ModelVersion: g.o.version}
		for i, in := range info.inputs {
			t := &pb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: in.Datatype, Shape: tensors[i].shape}
			if shm != nil {
				t.Parameters = shmParameters(shm.inputs[k][i])
			} else {
				r.RawInputContents = append(r.RawInputContents, tensors[i].raw)
			}
			r.Inputs = append(r.Inputs, t)
		}
		if shm != nil {
			for i, out := range info.outputs {
				r.Outputs = append(r.Outputs, &pb.ModelInferRequest_InferRequestedOutputTensor{Name: out.Name, Parameters: shmParameters(shm.outputs[i])})
			}
		}
		g.reqs = append(g.reqs, r)
	}
	return nil
}

// shmParameters are the shared-memory extension's tensor parameters.
func shmParameters(r shmRef) map[string]*pb.InferParameter {
	return map[string]*pb.InferParameter{
		"shared_memory_region":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: r.region}},
		"shared_memory_byte_size": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: r.size}},
		"shared_memory_offset":    {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: r.offset}},
	}
}

func (g *grpcProtocol) registerSystemShm(ctx context.Context, name, key string, size int64) error {
	_, err := g.client.SystemSharedMemoryRegister(ctx, &pb.SystemSharedMemoryRegisterRequest{Name: name, Key: key, ByteSize: uint64(size)})
	return err
}

func (g *grpcProtocol) unregisterSystemShm(ctx context.Context, name string) error {
	_, err := g.client.SystemSharedMemoryUnregister(ctx, &pb.SystemSharedMemoryUnregisterRequest{Name: name})
	return err
}

func (g *grpcProtocol) stats(ctx context.Context, model modelRef) (statsSnapshot, error) {
	resp, err := g.client.ModelStatistics(ctx, &pb.ModelStatisticsRequest{Name: model.name, Version: model.version})
	if err != nil {
		return statsSnapshot{}, fmt.Errorf("statistics: %w", err)
	}
	if len(resp.GetModelStats()) == 0 {
		return statsSnapshot{}, errors.New("statistics: no model_stats entry")
	}
	var s statsSnapshot
	for _, m := range resp.GetModelStats() {
		s.name, s.version = m.GetName(), m.GetVersion()
		st := m.GetInferenceStats()
		s.add(statsSnapshot{
			successCount: int64(st.GetSuccess().GetCount()), successNS: int64(st.GetSuccess().GetNs()),
			inferenceCount: int64(m.GetInferenceCount()), executionCount: int64(m.GetExecutionCount()),
			queueCount: int64(st.GetQueue().GetCount()), queueNS: int64(st.GetQueue().GetNs()),
			inputCount: int64(st.GetComputeInput().GetCount()), inputNS: int64(st.GetComputeInput().GetNs()),
			inferCount: int64(st.GetComputeInfer().GetCount()), inferNS: int64(st.GetComputeInfer().GetNs()),
			outputCount: int64(st.GetComputeOutput().GetCount()), outputNS: int64(st.GetComputeOutput().GetNs()),
			cacheHitCount: int64(st.GetCacheHit().GetCount()), cacheHitNS: int64(st.GetCacheHit().GetNs()),
			cacheMissCount: int64(st.GetCacheMiss().GetCount()), cacheMissNS: int64(st.GetCacheMiss().GetNs()),
		})
	}
	return s, nil
}

func (g *grpcProtocol) conn() conn {
	c := &timingCodec{base: encoding.GetCodecV2("proto")}
	if g.o.streaming {
		return &streamConn{g: g, codec: c}
	}
	return &unaryConn{g: g, codec: c, opt: grpc.ForceCodecV2(c)}
}

// timingCodec is gRPC's proto codec, timing what the client spends
// marshalling requests and unmarshalling answers: perf_analyzer's gRPC
// send and receive times. Each belongs to one sender's conn, which has one
// request in flight and marshals and unmarshals on the sender's goroutine.
type timingCodec struct {
	base encoding.CodecV2
	t    ioTime
}

func (c *timingCodec) Marshal(v any) (mem.BufferSlice, error) {
	start := time.Now()
	b, err := c.base.Marshal(v)
	c.t.send += time.Since(start)
	return b, err
}

func (c *timingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	start := time.Now()
	err := c.base.Unmarshal(data, v)
	c.t.recv += time.Since(start)
	return err
}

func (c *timingCodec) Name() string { return c.base.Name() }

// take gives the time since the last take.
func (c *timingCodec) take() ioTime {
	t := c.t
	c.t = ioTime{}
	return t
}

func (g *grpcProtocol) shutdown() { g.cc.Close() }

type unaryConn struct {
	g     *grpcProtocol
	codec *timingCodec
	opt   grpc.CallOption // ForceCodecV2(codec), made once
}

func (c *unaryConn) infer(ctx context.Context, i int) (ioTime, error) {
	_, err := c.g.client.ModelInfer(ctx, c.g.reqs[i], c.opt)
	return c.codec.take(), err
}

func (*unaryConn) close() {}

// streamError is a response on the stream that carries error_message.
type streamError struct{ msg string }

func (e *streamError) Error() string { return "stream: " + e.msg }

// streamConn is one sender's ModelStreamInfer stream, opened on its first
// request (with that request's context, which every later one shares) and
// again after a stream broke. One request is in flight on it at a time.
type streamConn struct {
	g      *grpcProtocol
	codec  *timingCodec // the stream's codec
	stream grpc.BidiStreamingClient[pb.ModelInferRequest, pb.ModelStreamInferResponse]
	cancel context.CancelFunc
}

func (c *streamConn) infer(ctx context.Context, i int) (ioTime, error) {
	err := c.roundTrip(ctx, i)
	return c.codec.take(), err
}

func (c *streamConn) roundTrip(ctx context.Context, i int) error {
	if c.stream == nil {
		sctx, cancel := context.WithCancel(ctx)
		st, err := c.g.client.ModelStreamInfer(sctx, grpc.ForceCodecV2(c.codec))
		if err != nil {
			cancel()
			return err
		}
		c.stream, c.cancel = st, cancel
	}
	if err := c.stream.Send(c.g.reqs[i]); err != nil {
		if err == io.EOF { // the stream ended: its status says why
			_, err = c.stream.Recv()
		}
		c.close()
		return err
	}
	resp, err := c.stream.Recv()
	if err != nil {
		if err == io.EOF {
			err = errors.New("stream: the server closed the stream")
		}
		c.close()
		return err
	}
	if m := resp.GetErrorMessage(); m != "" {
		return &streamError{m}
	}
	return nil
}

func (c *streamConn) close() {
	if c.stream == nil {
		return
	}
	_ = c.stream.CloseSend()
	c.cancel()
	c.stream, c.cancel = nil, nil
}
