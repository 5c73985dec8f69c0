package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
)

// The benchmarks of this file measure, side by side in one run, what the
// gRPC frontend costs (BENCHMARKS.md, "gRPC"). They report p50 latency and
// throughput per sub-benchmark and, in a closing "ratio" sub-benchmark, the
// ratios of the medians over -count repetitions. Speed is never asserted.
//
//	go test ./platforms/grpcapi -run '^$' -bench BenchmarkGRPC -benchtime 2s -count 3

// benchSimpleConfig is `simple` as httpapi's BenchmarkSimple serves it: two
// CPU instances.
const benchSimpleConfig = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`

// benchIdentityConfig is an FP32 identity with a variable dimension.
const benchIdentityConfig = `name: "identity_fp32"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`

// identityElems is the 4 MiB FP32 tensor's element count: shape [1, 1<<20].
const identityElems = 1 << 20

// benchServers is one core served over gRPC and over HTTP, each on its own
// loopback listener.
type benchServers struct {
	grpcAddr string // host:port
	// grpcBefore serves the same core over gRPC with grpc-go's default
	// HTTP/2 settings (Server.callOptions), as before transportOptions.
	grpcBefore string
	httpBase   string // http://host:port
	root       string // the repository
	core       *core.Server
}

// benchModels are `simple` and `identity_fp32`.
func benchModels() map[string]servertest.Model {
	return map[string]servertest.Model{
		"simple":        {Config: benchSimpleConfig, ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
		"identity_fp32": {Config: benchIdentityConfig, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))},
	}
}

// startBenchServers starts the core over a repository of models, grpcapi
// on one listener and httpapi on another.
func startBenchServers(b *testing.B, models map[string]servertest.Model) benchServers {
	b.Helper()
	root := servertest.WriteRepo(b, models)
	c := servertest.Start(b, servertest.Options{Repo: root})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	api := New(c, Options{Logger: quiet})
	serve := func(opts []grpc.ServerOption) string {
		g := grpc.NewServer(opts...)
		api.Register(g)
		gl, err := net.Listen("tcp", "127.0.0.1:0")
		servertest.Must(b, err)
		go func() { _ = g.Serve(gl) }()
		b.Cleanup(g.Stop)
		return gl.Addr().String()
	}
	grpcAddr, grpcBefore := serve(api.ServerOptions()), serve(api.callOptions())

	hs := &http.Server{Handler: httpapi.New(c, httpapi.Options{Logger: quiet}), ReadHeaderTimeout: 10 * time.Second}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(b, err)
	go func() { _ = hs.Serve(hl) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return benchServers{grpcAddr: grpcAddr, grpcBefore: grpcBefore, httpBase: "http://" + hl.Addr().String(), root: root, core: c}
}

// bareGRPC is the floor of any grpc-go inference server: the generated
// service with a ModelInfer that takes the request grpc-go has already
// unmarshalled and answers a fixed, precomputed reply; no model, routing,
// validation or scheduling.
type bareGRPC struct {
	pb.UnimplementedGRPCInferenceServiceServer
	reply *pb.ModelInferResponse
}

func (s *bareGRPC) ModelInfer(_ context.Context, req *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	if len(req.Inputs) == 0 || len(req.RawInputContents) != len(req.Inputs) {
		return nil, status.Error(codes.InvalidArgument, "bad request")
	}
	return s.reply, nil
}

// startBareGRPC serves bareGRPC on a loopback listener with the same message
// size limits and stream workers as grpcapi, and its HTTP/2 settings and
// codec (tuned) or grpc-go's defaults, and returns its address.
func startBareGRPC(b *testing.B, reply *pb.ModelInferResponse, tuned bool) string {
	b.Helper()
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(math.MaxInt32), grpc.MaxSendMsgSize(math.MaxInt32), grpc.NumStreamWorkers(streamWorkers)}
	if tuned {
		opts = append(opts, grpc.ForceServerCodecV2(newInferCodec()))
		opts = append(opts, transportOptions()...)
	}
	g := grpc.NewServer(opts...)
	pb.RegisterGRPCInferenceServiceServer(g, &bareGRPC{reply: reply})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(b, err)
	go func() { _ = g.Serve(ln) }()
	b.Cleanup(g.Stop)
	return ln.Addr().String()
}

// dialBench opens one client connection (HTTP/2 multiplexes every caller
// over it, as tritonclient's gRPC client does) without message size
// limits: with DialOptions (tuned) or with grpc-go's defaults otherwise.
func dialBench(b *testing.B, addr string, tuned bool) pb.GRPCInferenceServiceClient {
	b.Helper()
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	}
	if tuned {
		opts = DialOptions()
	}
	conn, err := grpc.NewClient(addr, opts...)
	servertest.Must(b, err)
	b.Cleanup(func() { _ = conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

// grpcCaller calls ModelInfer with req and wants as many raw outputs as
// outputs.
func grpcCaller(client pb.GRPCInferenceServiceClient, req *pb.ModelInferRequest, outputs int) func() error {
	return func() error {
		resp, err := client.ModelInfer(context.Background(), req)
		if err != nil {
			return err
		}
		if len(resp.RawOutputContents) != outputs {
			return fmt.Errorf("%d raw outputs, want %d", len(resp.RawOutputContents), outputs)
		}
		return nil
	}
}

// httpBinaryCaller posts a binary-extension request (JSON header, then the
// blobs, Inference-Header-Content-Length set) over keep-alive connections
// without asking for compression, and reads the whole reply.
func httpBinaryCaller(url, header string, blobs ...[]byte) func() error {
	body := []byte(header)
	for _, blob := range blobs {
		body = append(body, blob...)
	}
	h := http.Header{}
	h.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	h.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	return func() error {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// simpleBinaryHeader asks for `simple` with both inputs and outputs as
// binary blobs, as tritonclient sends it with binary_data=True.
const simpleBinaryHeader = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}`

// BenchmarkGRPCSimple measures `simple` (AddSub INT32 [1,16], two CPU
// instances) over gRPC ModelInfer with raw_input_contents against a bare
// grpc-go handler of the same service that answers inferd's own reply, and
// against HTTP with the binary extension on the same core, at concurrency 1
// and 16. The gRPC pair runs twice: as served now, with DialOptions'
// client, and "before", both servers and the client with grpc-go's
// default HTTP/2 settings and codec (the bare one's) as before
// transportOptions.
func BenchmarkGRPCSimple(b *testing.B) {
	srv := startBenchServers(b, benchModels())
	client := dialBench(b, srv.grpcAddr, true)
	req := simpleRequest(true)
	reply, err := client.ModelInfer(context.Background(), req)
	servertest.Must(b, err)
	if len(reply.RawOutputContents) != 2 {
		b.Fatalf("%d raw outputs", len(reply.RawOutputContents))
	}
	a, c := simpleInputs()
	callers := []struct {
		name string
		call func() error
	}{
		{"bare-grpc-before", grpcCaller(dialBench(b, startBareGRPC(b, reply, false), false), req, 2)},
		{"grpc-before", grpcCaller(dialBench(b, srv.grpcBefore, false), req, 2)},
		{"bare-grpc", grpcCaller(dialBench(b, startBareGRPC(b, reply, true), true), req, 2)},
		{"grpc", grpcCaller(client, req, 2)},
		{"http-binary", httpBinaryCaller(srv.httpBase+"/v2/models/simple/infer", simpleBinaryHeader, int32s(a), int32s(c))},
	}
	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		for _, cl := range callers {
			rs.Run(b, cl.name+"/c"+strconv.Itoa(conc), conc, 1, cl.call)
		}
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "grpc/bare-p50-c1", Num: "grpc/c1", Den: "bare-grpc/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "grpc/bare-thru-c16", Num: "grpc/c16", Den: "bare-grpc/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "before-grpc/bare-p50-c1", Num: "grpc-before/c1", Den: "bare-grpc-before/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "before-grpc/bare-thru-c16", Num: "grpc-before/c16", Den: "bare-grpc-before/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "grpc/before-thru-c16", Num: "grpc/c16", Den: "grpc-before/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "grpc/http-p50-c1", Num: "grpc/c1", Den: "http-binary/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "grpc/http-thru-c1", Num: "grpc/c1", Den: "http-binary/c1", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "grpc/http-p50-c16", Num: "grpc/c16", Den: "http-binary/c16", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "grpc/http-thru-c16", Num: "grpc/c16", Den: "http-binary/c16", Of: sidebyside.ReqOf},
	)
}

// BenchmarkGRPCIdentity4MiB measures a 4 MiB FP32 identity ([1, 1<<20])
// over gRPC ModelInfer with raw_input_contents and over HTTP with the binary
// extension on the same core, at concurrency 1 and 16. gRPC runs as served
// now with DialOptions' client; with grpc-go's default client
// (grpc-server-only: what the server's settings alone change); "before",
// server and client with grpc-go's default HTTP/2 settings; and against a
// bare grpc-go handler with the server's settings and codec that answers
// inferd's own reply (the floor of grpc-go's framing).
func BenchmarkGRPCIdentity4MiB(b *testing.B) {
	srv := startBenchServers(b, benchModels())
	client := dialBench(b, srv.grpcAddr, true)
	data := make([]byte, 4*identityElems)
	for i := range data {
		data[i] = byte(i)
	}
	req := &pb.ModelInferRequest{
		ModelName:        "identity_fp32",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, identityElems}}},
		RawInputContents: [][]byte{data},
	}
	resp, err := client.ModelInfer(context.Background(), req)
	servertest.Must(b, err)
	if len(resp.RawOutputContents) != 1 || !bytes.Equal(resp.RawOutputContents[0], data) {
		b.Fatal("identity did not echo its input")
	}
	header := `{"inputs":[{"name":"INPUT0","shape":[1,` + strconv.Itoa(identityElems) + `],"datatype":"FP32","parameters":{"binary_data_size":` +
		strconv.Itoa(len(data)) + `}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
	callers := []struct {
		name string
		call func() error
	}{
		{"grpc-before", grpcCaller(dialBench(b, srv.grpcBefore, false), req, 1)},
		{"grpc-server-only", grpcCaller(dialBench(b, srv.grpcAddr, false), req, 1)},
		{"grpc", grpcCaller(client, req, 1)},
		{"bare-grpc", grpcCaller(dialBench(b, startBareGRPC(b, resp, true), true), req, 1)},
		{"http-binary", httpBinaryCaller(srv.httpBase+"/v2/models/identity_fp32/infer", header, data)},
	}
	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		for _, cl := range callers {
			rs.Run(b, cl.name+"/c"+strconv.Itoa(conc), conc, 1, cl.call)
		}
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "grpc/http-thru-c1", Num: "grpc/c1", Den: "http-binary/c1", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "grpc/http-thru-c16", Num: "grpc/c16", Den: "http-binary/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "before-grpc/http-thru-c1", Num: "grpc-before/c1", Den: "http-binary/c1", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "before-grpc/http-thru-c16", Num: "grpc-before/c16", Den: "http-binary/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "server-only-grpc/http-thru-c1", Num: "grpc-server-only/c1", Den: "http-binary/c1", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "server-only-grpc/http-thru-c16", Num: "grpc-server-only/c16", Den: "http-binary/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "bare/http-thru-c1", Num: "bare-grpc/c1", Den: "http-binary/c1", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "bare/http-thru-c16", Num: "bare-grpc/c16", Den: "http-binary/c16", Of: sidebyside.ReqOf},
		sidebyside.Ratio{Unit: "grpc/http-p50-c1", Num: "grpc/c1", Den: "http-binary/c1", Of: sidebyside.P50Of},
		sidebyside.Ratio{Unit: "grpc/http-p50-c16", Num: "grpc/c16", Den: "http-binary/c16", Of: sidebyside.P50Of},
	)
}
