package grpcapi

import (
	"bytes"
	"compress/zlib"
	"context"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

type methodKey struct{}

// encodings records the grpc-encoding of every response header a client
// receives, by method.
type encodings struct {
	mu  sync.Mutex
	got map[string][]string
}

func (e *encodings) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}
func (e *encodings) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && h.Client {
		m, _ := ctx.Value(methodKey{}).(string)
		e.mu.Lock()
		e.got[m] = append(e.got[m], h.Compression)
		e.mu.Unlock()
	}
}
func (*encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*encodings) HandleConn(context.Context, stats.ConnStats)                       {}

// last is the encoding of the latest response header of method; "" and
// "identity" both mean uncompressed.
func (e *encodings) last(method string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.got[method]
	if len(g) == 0 {
		return "<no header>"
	}
	if g[len(g)-1] == "" {
		return encoding.Identity
	}
	return g[len(g)-1]
}

// watched is a client of h's server whose response encodings are recorded.
func watched(t *testing.T, h *harness) (pb.GRPCInferenceServiceClient, *encodings) {
	t.Helper()
	e := &encodings{got: map[string][]string{}}
	conn, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(e))
	servertest.Must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn), e
}

// TestCompressedRequests: gzip and deflate requests are accepted on
// ModelInfer, ModelStreamInfer and other RPCs, and with level none every
// response is uncompressed (the request's encoding is not mirrored).
func TestCompressedRequests(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	client, enc := watched(t, h)
	c := ctx(t)
	for _, algo := range []string{gzip.Name, Deflate} {
		for _, raw := range []bool{true, false} {
			resp, err := client.ModelInfer(c, simpleRequest(raw), grpc.UseCompressor(algo))
			if err != nil {
				t.Fatalf("%s raw=%v: %v", algo, raw, err)
			}
			checkSimple(t, resp)
			if got := enc.last(pb.GRPCInferenceService_ModelInfer_FullMethodName); got != encoding.Identity {
				t.Fatalf("%s request: response encoding %q, want identity", algo, got)
			}
		}
		md, err := client.ServerMetadata(c, &pb.ServerMetadataRequest{}, grpc.UseCompressor(algo))
		if err != nil || md.Name != "triton" {
			t.Fatal(md, err)
		}
		if got := enc.last(pb.GRPCInferenceService_ServerMetadata_FullMethodName); got != encoding.Identity {
			t.Fatalf("%s ServerMetadata: response encoding %q", algo, got)
		}
		st, err := client.ModelStreamInfer(c, grpc.UseCompressor(algo))
		servertest.Must(t, err)
		servertest.Must(t, st.Send(simpleRequest(true)))
		r, err := st.Recv()
		if err != nil || r.ErrorMessage != "" {
			t.Fatal(r, err)
		}
		checkSimple(t, r.InferResponse)
		servertest.Must(t, st.CloseSend())
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("stream end: %v", err)
		}
		if got := enc.last(pb.GRPCInferenceService_ModelStreamInfer_FullMethodName); got != encoding.Identity {
			t.Fatalf("%s stream: response encoding %q", algo, got)
		}
	}
}

// TestResponseCompression: with a level, ModelInfer and ModelStreamInfer
// responses are compressed with gRPC core's choice among gzip and deflate
// (a Go client accepts both: low → gzip, medium/high → deflate) and decode
// correctly; other RPCs stay uncompressed.
func TestResponseCompression(t *testing.T) {
	for _, tc := range []struct{ level, want string }{
		{"low", gzip.Name}, {"medium", Deflate}, {"HIGH", Deflate}, {"none", encoding.Identity}, {"", encoding.Identity},
	} {
		t.Run(tc.level, func(t *testing.T) {
			h := start(t, servertest.Options{}, Options{ResponseCompression: tc.level})
			client, enc := watched(t, h)
			c := ctx(t)
			for _, algo := range []string{"", gzip.Name, Deflate} {
				var opts []grpc.CallOption
				if algo != "" {
					opts = append(opts, grpc.UseCompressor(algo))
				}
				resp, err := client.ModelInfer(c, simpleRequest(true), opts...)
				if err != nil {
					t.Fatalf("request %q: %v", algo, err)
				}
				checkSimple(t, resp)
				if got := enc.last(pb.GRPCInferenceService_ModelInfer_FullMethodName); got != tc.want {
					t.Fatalf("request %q: ModelInfer response encoding %q, want %q", algo, got, tc.want)
				}
				if _, err := client.ServerLive(c, &pb.ServerLiveRequest{}, opts...); err != nil {
					t.Fatal(err)
				}
				if got := enc.last(pb.GRPCInferenceService_ServerLive_FullMethodName); got != encoding.Identity {
					t.Fatalf("request %q: ServerLive response encoding %q", algo, got)
				}
			}
			st, err := client.ModelStreamInfer(c)
			servertest.Must(t, err)
			for range 2 {
				servertest.Must(t, st.Send(simpleRequest(true)))
				r, err := st.Recv()
				if err != nil || r.ErrorMessage != "" {
					t.Fatal(r, err)
				}
				checkSimple(t, r.InferResponse)
			}
			servertest.Must(t, st.CloseSend())
			if _, err := st.Recv(); err != io.EOF {
				t.Fatalf("stream end: %v", err)
			}
			if got := enc.last(pb.GRPCInferenceService_ModelStreamInfer_FullMethodName); got != tc.want {
				t.Fatalf("stream response encoding %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResponseCompressor is gRPC core's level rule over what the client
// accepts.
func TestResponseCompressor(t *testing.T) {
	for _, tc := range []struct {
		level    string
		accepted []string
		want     string
	}{
		{"low", []string{"identity", "deflate", "gzip"}, "gzip"},
		{"medium", []string{"identity", "deflate", "gzip"}, "deflate"},
		{"high", []string{"identity", "deflate", "gzip"}, "deflate"},
		{"low", []string{"deflate"}, "deflate"},
		{"high", []string{"gzip"}, "gzip"},
		{"medium", []string{"gzip"}, "gzip"},
		{"high", []string{"identity"}, "identity"},
		{"high", nil, "identity"},
		{"none", []string{"gzip", "deflate"}, "identity"},
	} {
		if got := responseCompressor(tc.level, tc.accepted); got != tc.want {
			t.Errorf("%s %v = %q, want %q", tc.level, tc.accepted, got, tc.want)
		}
	}
	for _, l := range []string{"", "none", "Low", "MEDIUM", "high"} {
		if !ValidCompressionLevel(l) {
			t.Errorf("%q refused", l)
		}
	}
	if ValidCompressionLevel("max") {
		t.Error("max accepted")
	}
}

// TestDeflateCodec: "deflate" is zlib-wrapped (RFC 1950) both ways, and
// pooled writers are reusable.
func TestDeflateCodec(t *testing.T) {
	comp := encoding.GetCompressor(Deflate)
	if comp == nil {
		t.Fatal("deflate not registered")
	}
	msg := bytes.Repeat([]byte("inferd deflate "), 100)
	for range 3 {
		var buf bytes.Buffer
		w, err := comp.Compress(&buf)
		servertest.Must(t, err)
		_, err = w.Write(msg)
		servertest.Must(t, err)
		servertest.Must(t, w.Close())
		zr, err := zlib.NewReader(bytes.NewReader(buf.Bytes()))
		servertest.Must(t, err)
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("zlib reading the codec's output: %v", err)
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		_, _ = zw.Write(msg)
		_ = zw.Close()
		r, err := comp.Decompress(&z)
		servertest.Must(t, err)
		got, err = io.ReadAll(r)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("codec reading zlib: %v", err)
		}
	}
	if _, err := comp.Decompress(bytes.NewReader([]byte{0x01, 0x02, 0x03})); err == nil {
		t.Fatal("raw (unwrapped) deflate accepted")
	}
}
