package orca_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/orca"
)

// BenchmarkInferLoadReport serves `simple` infer requests straight into the
// API handler (no network, so allocs/op are inferd's own) and shows what
// load reporting costs a request:
//
//   - off: no Reporter (--allow-metrics=false), the baseline;
//
//   - unasked: a Reporter, the request does not ask: must equal off in
//     allocs/op and, within noise, in ns/op;
//
//   - unasked-while-others-ask: the same while another goroutine computes
//     reports of the same model without pause; allocs/op here also count
//     that goroutine's allocations (the counter is process-wide: subtract
//     reports/op times a report's allocations), and ns/op its share of
//     the CPUs and of the statistics lock it takes for a moment per report;
//
//   - asked: the request asks for a JSON report (the price of a report).
//
//     go test ./platforms/orca -run '^$' -bench BenchmarkInferLoadReport -benchmem -benchtime 1s -count 1
func BenchmarkInferLoadReport(b *testing.B) {
	srv := servertest.Start(b, servertest.Options{Repo: servertest.WriteRepo(b, map[string]servertest.Model{"simple": servertest.Simple("simple")})})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	loads := orca.New(orca.Options{Logger: quiet})
	body := []byte(simpleBody)
	cases := []struct {
		name   string
		loads  *orca.Reporter
		ask    bool
		others bool
	}{
		{"off", nil, false, false},
		{"unasked", loads, false, false},
		{"unasked-while-others-ask", loads, false, true},
		{"asked", loads, true, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			api := httpapi.New(srv, httpapi.Options{Logger: quiet, LoadReports: c.loads})
			req, err := http.NewRequest(http.MethodPost, "/v2/models/simple/infer", nil)
			servertest.Must(b, err)
			req.Header = http.Header{"Content-Type": {"application/json"}}
			if c.ask {
				req.Header.Set(orca.RequestHeader, "json")
			}
			req.ContentLength = int64(len(body))
			rb := &rewindBody{}
			req.Body = rb
			w := &discardWriter{header: http.Header{}}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var reports atomic.Int64
			if c.others {
				wg.Go(func() { askForever(b, srv, loads, stop, &reports) })
			}
			b.ReportAllocs()
			for b.Loop() {
				rb.Reset(body)
				clear(w.header)
				w.status = 0
				api.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			close(stop)
			wg.Wait()
			if c.others {
				// What the other goroutine adds to allocs/op: reports/op
				// times a report's allocations (asked minus unasked).
				b.ReportMetric(float64(reports.Load())/float64(b.N), "reports/op")
			}
		})
	}
}

// askForever computes reports of `simple` until stop closes.
func askForever(b *testing.B, srv *core.Server, loads *orca.Reporter, stop chan struct{}, n *atomic.Int64) {
	mv, release, err := srv.Acquire("simple", core.LatestVersion)
	if err != nil {
		b.Error(err)
		return
	}
	defer release()
	for {
		select {
		case <-stop:
			return
		default:
			_ = loads.Report(mv)
			n.Add(1)
		}
	}
}

// BenchmarkGRPCLoadReport is ModelInfer of `simple` over a loopback gRPC
// connection: without a Reporter (so without grpc-go's ORCA server option),
// with the report on every call (the default), and with it only on calls
// that ask, for a call that does not ask and for one that does.
//
//	go test ./platforms/orca -run '^$' -bench BenchmarkGRPCLoadReport -benchmem -benchtime 1s -count 1
func BenchmarkGRPCLoadReport(b *testing.B) {
	srv := servertest.Start(b, servertest.Options{Repo: servertest.WriteRepo(b, map[string]servertest.Model{"simple": servertest.Simple("simple")})})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	in := &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
	}}
	for _, c := range []struct {
		name  string
		loads *orca.Reporter
		ask   bool
	}{
		{"off", nil, false},
		{"every call", orca.New(orca.Options{Logger: quiet}), false},
		{"only asked, unasked", orca.New(orca.Options{Logger: quiet, TrailerOnlyWhenAsked: true}), false},
		{"only asked, asked", orca.New(orca.Options{Logger: quiet, TrailerOnlyWhenAsked: true}), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := grpcapi.New(srv, grpcapi.Options{Logger: quiet, LoadReports: c.loads})
			gs := grpc.NewServer(g.ServerOptions()...)
			g.Register(gs)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			servertest.Must(b, err)
			go func() { _ = gs.Serve(ln) }()
			defer gs.Stop()
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			servertest.Must(b, err)
			defer conn.Close()
			client := pb.NewGRPCInferenceServiceClient(conn)
			ctx := context.Background()
			if c.ask {
				ctx = metadata.AppendToOutgoingContext(ctx, orca.RequestHeader, "json")
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ModelInfer(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rewindBody is a request body refilled without allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
