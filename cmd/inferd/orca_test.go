package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/orca"
)

// TestLoadReports: the binary answers endpoint-load-metrics-format on its
// HTTP listener, puts the report in every gRPC call's trailer (only in
// those that ask with --grpc-load-report-every-call=false), and reports
// nothing with --allow-metrics=false (as Triton ties the report to the
// metrics).
func TestLoadReports(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		want     bool // HTTP report
		grpcAsk  bool
		grpcWant bool
	}{
		{"metrics on, asked", nil, true, true, true},
		{"metrics on, not asked", nil, true, false, true},
		{"only when asked, asked", []string{"--grpc-load-report-every-call=false"}, true, true, true},
		{"only when asked, not asked", []string{"--grpc-load-report-every-call=false"}, true, false, false},
		{"metrics off", []string{"--allow-metrics=false"}, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := start(t, append([]string{"--model-repository=../../examples/model_repository"}, c.args...)...)
			req, err := http.NewRequest(http.MethodPost, r.http+"/v2/models/simple/infer", strings.NewReader(readmeExample))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(orca.RequestHeader, "json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			text, bin := resp.Header.Get(orca.Header), resp.Header.Get(orca.BinHeader)
			if got := strings.HasPrefix(text, `JSON {"cpu_utilization":`) && bin != ""; got != c.want || resp.StatusCode != 200 {
				t.Fatalf("status %d, %s %q, %s %q; want a report %v", resp.StatusCode, orca.Header, text, orca.BinHeader, bin, c.want)
			}

			conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			if c.grpcAsk {
				ctx = metadata.AppendToOutgoingContext(ctx, orca.RequestHeader, "text")
			}
			var trailer metadata.MD
			in := &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
				{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
				{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
			}}
			if _, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, in, grpc.Trailer(&trailer)); err != nil {
				t.Fatal(err)
			}
			if got := len(trailer.Get(orca.BinHeader)) == 1; got != c.grpcWant {
				t.Fatalf("gRPC trailer %v; want a report %v", trailer, c.grpcWant)
			}
		})
	}
}
