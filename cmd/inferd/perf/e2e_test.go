package perf

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
)

// testModels are served by the in-process inferd: Triton's "simple" (and
// simple_b, simple_g and simple_s, the same, so that parallel tests leave
// each one's statistics to the test that checks them), an
// FP16 and a BYTES identity, and a non-batching FP32 identity with a
// variable dim.
func testModels(t *testing.T) map[string]servertest.Model {
	t.Helper()
	cpu := "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
	simple := `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
` + cpu
	addSub := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	return map[string]servertest.Model{
		"simple":   {Config: simple, ONNX: addSub},
		"simple_b": {Config: simple, ONNX: addSub},
		"simple_g": {Config: simple, ONNX: addSub},
		"simple_s": {Config: simple, ONNX: addSub},
		"id_fp16": {Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ -1 ] } ]
` + cpu, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float16, -1, -1))},
		"id_bytes": {Config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
` + cpu, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.String, -1, 1))},
		"id_nobatch": {Config: `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
` + cpu, ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1))},
	}
}

// inferCounter counts, per model, the infer requests the gRPC API
// received: ModelInfer calls, and ModelStreamInfer requests and streams.
type inferCounter struct {
	mu              sync.Mutex
	unary, streamed map[string]int
	streams         map[string]int
}

func (c *inferCounter) add(m map[string]int, model string) {
	c.mu.Lock()
	m[model]++
	c.mu.Unlock()
}

func (c *inferCounter) get(m map[string]int, model string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[model]
}

func (c *inferCounter) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*pb.ModelInferRequest); ok {
		c.add(c.unary, r.GetModelName())
	}
	return handler(ctx, req)
}

func (c *inferCounter) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &countingStream{ServerStream: ss, c: c})
}

type countingStream struct {
	grpc.ServerStream
	c    *inferCounter
	seen bool
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if r, ok := m.(*pb.ModelInferRequest); ok && err == nil {
		s.c.add(s.c.streamed, r.GetModelName())
		if !s.seen {
			s.seen = true
			s.c.add(s.c.streams, r.GetModelName())
		}
	}
	return err
}

// startInferd runs the real inferd core with the v2 HTTP API and the gRPC
// API on loopback listeners and returns their host:ports and the count of
// gRPC infer requests.
func startInferd(t *testing.T) (httpAddr, grpcAddr string, counts *inferCounter) {
	t.Helper()
	core := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, testModels(t))})
	hs := httptest.NewServer(httpapi.New(core, httpapi.Options{}))
	t.Cleanup(hs.Close)

	counts = &inferCounter{unary: map[string]int{}, streamed: map[string]int{}, streams: map[string]int{}}
	api := grpcapi.New(core, grpcapi.Options{})
	gs := grpc.NewServer(append(api.ServerOptions(),
		grpc.ChainUnaryInterceptor(counts.unaryInterceptor), grpc.ChainStreamInterceptor(counts.streamInterceptor))...)
	api.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return strings.TrimPrefix(hs.URL, "http://"), ln.Addr().String(), counts
}

// grpcStats is the model's cumulative inference and success counts as
// the server's gRPC statistics give them.
func grpcStats(t *testing.T, addr, model string) (inferences, successes uint64) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer cc.Close()
	resp, err := pb.NewGRPCInferenceServiceClient(cc).ModelStatistics(t.Context(), &pb.ModelStatisticsRequest{Name: model})
	must(t, err)
	for _, m := range resp.GetModelStats() {
		inferences += m.GetInferenceCount()
		successes += m.GetInferenceStats().GetSuccess().GetCount()
	}
	return inferences, successes
}

var must = servertest.Must

// runPerf runs Main and returns exit code, stdout and stderr.
func runPerf(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// fast are flags for short runs: windows of 100 ms, and a stability band
// wide enough that three windows with requests in them agree
// (perf_analyzer's rule compares the largest to the smallest, and on two
// busy shared cores 100 ms windows of a real server's sub-millisecond
// requests differ tenfold). Tests with these flags check what the tool
// sends, measures and reports, not the stability rule: TestStability
// checks that with a realistic band, against a fake server whose latency
// the test sets window by window. A window in which no request finished
// is never stable: up to 6 windows leave room for one or two under -race
// on a loaded machine.
var fast = []string{"-p", "100", "-s", "100000", "--max-trials", "6"}

// settled tells whether stderr's progress shows the setting label stable.
func settled(stderr, label string) bool {
	return regexp.MustCompile(regexp.QuoteMeta(label) + `: window [3-6]/6: .*, stable`).MatchString(stderr)
}

// readReport reads a --json report, and its bytes for error messages.
func readReport(t *testing.T, path string) (report, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var rep report
	must(t, json.Unmarshal(b, &rep))
	return rep, b
}

func readCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	must(t, err)
	var out []map[string]string
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = row[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return v
}

func TestAgainstInferd(t *testing.T) {
	addr, gaddr, counts := startInferd(t)

	t.Run("concurrency sweep", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name  string
			flags []string
			batch int
		}{
			{"binary", nil, 1},
			{"json", []string{"--protocol-json"}, 1},
			{"binary batch 2", []string{"-b", "2"}, 2},
		} {
			// One at a time: the server's statistics are per model.
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				csvPath, jsonPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
				args := append([]string{"-m", "simple", "-u", addr, "--concurrency-range", "1:2", "-f", csvPath, "--json", jsonPath}, fast...)
				code, stdout, stderr := runPerf(t, append(args, tc.flags...)...)
				if code != 0 {
					t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
				}
				if !strings.Contains(stdout, "Concurrency") || !settled(stderr, "concurrency 2") {
					t.Errorf("no table or progress:\n%s\n%s", stdout, stderr)
				}
				rows := readCSV(t, csvPath)
				if len(rows) != 2 {
					t.Fatalf("%d CSV rows, want 2", len(rows))
				}
				// perf_analyzer sorts the rows by throughput.
				if c0, c1 := rows[0]["Concurrency"], rows[1]["Concurrency"]; !(c0 == "1" && c1 == "2" || c0 == "2" && c1 == "1") ||
					num(t, rows[0]["Inferences/Second"]) > num(t, rows[1]["Inferences/Second"]) {
					t.Errorf("rows %v", rows)
				}
				for i, row := range rows {
					if num(t, row["Inferences/Second"]) <= 0 {
						t.Errorf("row %d: throughput %s", i, row["Inferences/Second"])
					}
					if num(t, row["p50 latency"]) > num(t, row["p99 latency"]) || num(t, row["p50 latency"]) <= 0 {
						t.Errorf("row %d: p50 %s p99 %s", i, row["p50 latency"], row["p99 latency"])
					}
					for _, col := range []string{"Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv"} {
						if v, ok := row[col]; !ok || v == "" || num(t, v) < 0 {
							t.Errorf("row %d: %s = %q", i, col, v)
						}
					}
				}
				rep, _ := readReport(t, jsonPath)
				if len(rep.Results) != 2 || rep.BatchSize != tc.batch {
					t.Fatalf("JSON report: %+v", rep)
				}
				for _, r := range rep.Results {
					if r.Server == nil || r.Server.Requests == 0 || r.Server.ComputeInfer <= 0 {
						t.Fatalf("no server split: %+v", r)
					}
					// inferd runs each request on its own (no dynamic
					// batching), so the server's batch is -b; not exactly,
					// as executions and successes are counted at different
					// moments and a snapshot can fall between them.
					if math.Abs(r.Server.AvgBatchSize-float64(tc.batch)) > 0.01*float64(tc.batch) {
						t.Errorf("server batch %v, want %d", r.Server.AvgBatchSize, tc.batch)
					}
					if !r.Stable || r.Windows < 3 || r.Throughput <= 0 || r.P50 > r.P99 || r.Avg <= 0 || r.Errors != 0 || r.ClientSendUS <= 0 || r.ClientRecvUS <= 0 {
						t.Errorf("result %+v", r)
					}
				}
			})
		}
	})

	t.Run("grpc", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, model string
			streaming   bool
		}{
			{"unary", "simple_g", false},
			{"streaming", "simple_s", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				csvPath, jsonPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
				args := append([]string{"-i", "grpc", "-m", tc.model, "-u", gaddr, "-b", "2", "--concurrency-range", "1:2", "-f", csvPath, "--json", jsonPath}, fast...)
				if tc.streaming {
					args = append(args, "--streaming")
				}
				code, stdout, stderr := runPerf(t, args...)
				if code != 0 {
					t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
				}
				want := "Protocol: gRPC, raw tensors"
				if tc.streaming {
					want = "Protocol: gRPC (streaming), raw tensors"
				}
				if !strings.Contains(stdout, want) || !strings.Contains(stdout, "Concurrency") || !settled(stderr, "concurrency 2") {
					t.Errorf("no settings, table or progress:\n%s\n%s", stdout, stderr)
				}
				if rows := readCSV(t, csvPath); len(rows) != 2 || num(t, rows[1]["Inferences/Second"]) <= 0 || rows[1]["Server Queue"] == "" {
					t.Errorf("CSV %v", rows)
				}
				rep, b := readReport(t, jsonPath)
				if rep.Protocol != "grpc" || rep.Streaming != tc.streaming || rep.Tensors != "raw" || rep.URL != gaddr || len(rep.Results) != 2 {
					t.Fatalf("JSON report: %s", b)
				}
				for i, r := range rep.Results {
					// Send and receive: marshalling the request and
					// unmarshalling the answer, as perf_analyzer's gRPC client
					// times them.
					if r.Concurrency != i+1 || !r.Stable || r.Windows < 3 || r.Throughput <= 0 || r.Errors != 0 || r.P50 > r.P99 || r.Avg <= 0 ||
						r.ClientSendUS <= 0 || r.ClientRecvUS <= 0 {
						t.Errorf("result %+v", r)
					}
					// Executions and inferences are counted at different
					// moments: a snapshot may fall between them, one
					// execution off in a window's few requests (under -race).
					if r.Server == nil || r.Server.ComputeInfer <= 0 || math.Abs(r.Server.AvgBatchSize-2) > 0.02+2/float64(r.Server.ExecutionCount) {
						t.Fatalf("server split %+v", r.Server)
					}
					// The server counts the same requests in the same
					// windows, but its snapshots are taken a moment after
					// the client's window ends.
					if d := math.Abs(float64(r.Server.Requests - int64(r.Requests))); d > float64(r.Requests)/4+float64(4*r.Concurrency) {
						t.Errorf("concurrency %d: server counted %d requests, the tool %d", r.Concurrency, r.Server.Requests, r.Requests)
					}
				}
				// Every request went over gRPC, unary or streamed as asked,
				// and the server's inference count is -b per request.
				unary, streamed := counts.get(counts.unary, tc.model), counts.get(counts.streamed, tc.model)
				sent := unary + streamed
				if tc.streaming && unary != 0 || !tc.streaming && streamed != 0 || sent == 0 {
					t.Errorf("%d ModelInfer calls, %d streamed requests", unary, streamed)
				}
				inferences, successes := grpcStats(t, gaddr, tc.model)
				if inferences != uint64(2*sent) || successes != uint64(sent) {
					t.Errorf("server: %d inferences, %d successes; the tool sent %d requests of batch 2", inferences, successes, sent)
				}
				// One stream for the request before measuring, then one per
				// concurrent sender: 1, then 2.
				if n := counts.get(counts.streams, tc.model); tc.streaming && n != 1+1+2 {
					t.Errorf("%d streams, want 4", n)
				}
			})
		}
		t.Run("datatypes", func(t *testing.T) {
			t.Parallel()
			for _, extra := range [][]string{nil, {"--streaming"}} {
				for _, model := range [][]string{{"-m", "id_fp16", "--shape", "INPUT0:7", "-b", "3"}, {"-m", "id_bytes", "--string-length", "5"}, {"-m", "id_nobatch", "--shape", "INPUT0:5"}} {
					jsonPath := filepath.Join(t.TempDir(), "r.json")
					code, stdout, stderr := runPerf(t, append(append(append([]string{"-i", "grpc", "-u", gaddr, "--json", jsonPath}, fast...), model...), extra...)...)
					if code != 0 {
						t.Fatalf("%v %v: exit %d\n%s\n%s", model, extra, code, stdout, stderr)
					}
					rep, b := readReport(t, jsonPath)
					if len(rep.Results) != 1 || rep.Results[0].Errors != 0 || rep.Results[0].Throughput <= 0 {
						t.Fatalf("%v %v: %s", model, extra, b)
					}
				}
			}
		})
		t.Run("errors", func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			closed := ln.Addr().String()
			ln.Close()
			for _, tc := range []struct {
				args []string
				code int
				want string
			}{
				{[]string{"-m", "nope", "-u", gaddr}, 1, `model "nope"`},
				{[]string{"-m", "simple", "-u", closed}, 1, "cannot reach the server"},
				{[]string{"-m", "simple", "-u", closed, "--streaming"}, 1, "cannot reach the server"},
				{[]string{"-m", "simple", "-u", gaddr, "-b", "9"}, 2, "takes at most 8"},
				{[]string{"-m", "id_fp16", "-u", gaddr}, 2, "give --shape INPUT0"},
			} {
				code, stdout, stderr := runPerf(t, append([]string{"-i", "grpc"}, tc.args...)...)
				if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
					t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q in one line", tc.args, code, stderr, stdout, tc.code, tc.want)
				}
			}
		})
	})

	t.Run("request rate", func(t *testing.T) {
		t.Parallel()
		csvPath := filepath.Join(t.TempDir(), "r.csv")
		code, stdout, stderr := runPerf(t, append([]string{"-m", "simple_b", "-u", addr, "--request-rate-range", "100:200:100", "-p", "300", "-f", csvPath}, fast[2:]...)...)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		rows := readCSV(t, csvPath)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		if r0, r1 := rows[0]["Request Rate"], rows[1]["Request Rate"]; !(r0 == "100" && r1 == "200" || r0 == "200" && r1 == "100") {
			t.Errorf("rates %q and %q", r0, r1)
		}
		for _, row := range rows {
			rate := num(t, row["Request Rate"])
			// An open loop sends on schedule: throughput follows the rate.
			if got := num(t, row["Inferences/Second"]); got < rate*0.6 || got > rate*1.4 {
				t.Errorf("rate %v: throughput %v", rate, got)
			}
		}
	})

	t.Run("datatypes", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"fp16 binary", []string{"-m", "id_fp16", "--shape", "INPUT0:7", "-b", "3"}},
			{"bytes binary", []string{"-m", "id_bytes", "--string-length", "5"}},
			{"bytes json", []string{"-m", "id_bytes", "--protocol-json", "--input-data", "zero"}},
			{"bytes --string-data", []string{"-m", "id_bytes", "--string-data", "hello"}},
			{"non-batching, --shape", []string{"-m", "id_nobatch", "--shape", "INPUT0:5", "--percentile", "90"}},
			{"request rate poisson", []string{"-m", "simple_b", "--request-rate-range", "200", "--request-distribution", "poisson"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				jsonPath := filepath.Join(t.TempDir(), "r.json")
				code, stdout, stderr := runPerf(t, append(append([]string{"-u", addr, "--json", jsonPath}, fast...), tc.args...)...)
				if code != 0 {
					t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
				}
				rep, b := readReport(t, jsonPath)
				if len(rep.Results) != 1 || rep.Results[0].Errors != 0 || rep.Results[0].Throughput <= 0 {
					t.Fatalf("%s", b)
				}
			})
		}
	})

	t.Run("data file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "data.json")
		must(t, os.WriteFile(path, []byte(`{"data":[
			{"INPUT0":[5,4,3,2,1,0,1,2,3,4,5,6,7,8,9,10],"INPUT1":{"content":[[1,1,1,1,1,1,1,1],[1,1,1,1,1,1,1,1]],"shape":[16]}},
			{"INPUT0":{"content":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"shape":[16]},"INPUT1":{"b64":"`+b64Int32(16, 2)+`"}}]}`), 0o644))
		// A directory of raw files, one per input, as perf_analyzer reads one.
		dir := filepath.Join(t.TempDir(), "raw")
		must(t, os.Mkdir(dir, 0o755))
		for _, in := range []string{"INPUT0", "INPUT1"} {
			raw, err := base64.StdEncoding.DecodeString(b64Int32(16, 4))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, in), raw, 0o644))
		}
		for _, extra := range [][]string{nil, {"--protocol-json"}, {"-b", "3"}, {"--input-data", dir}, {"--input-data", dir, "--input-data", path, "-b", "2"}} {
			code, stdout, stderr := runPerf(t, append(append([]string{"-m", "simple_b", "-u", addr, "--input-data", path}, fast...), extra...)...)
			if code != 0 || strings.Contains(stderr, "failed") {
				t.Fatalf("%v: exit %d\n%s\n%s", extra, code, stdout, stderr)
			}
		}
	})

	t.Run("bodies round-trip through identity models", func(t *testing.T) {
		t.Parallel()
		// The identity models echo their input, so the server's binary
		// output must equal the tensor the tool encoded: proof that the
		// encoding is what the server reads, not only that it accepts it.
		hc := newHTTPClient(1)
		for _, tc := range []struct {
			model, dt string
			shape     []int64
		}{
			{"id_fp16", "FP16", []int64{2, 3}},
			{"id_bytes", "BYTES", []int64{2, 1}},
		} {
			in := []tensorMeta{{Name: "INPUT0", Datatype: tc.dt}}
			out := []tensorMeta{{Name: "OUTPUT0", Datatype: tc.dt}}
			td, err := synthetic(tc.dt, tc.shape, false, 9, rand.New(rand.NewPCG(7, 7)))
			must(t, err)
			body, err := encodeRequest(in, []tensorData{td}, out, true)
			must(t, err)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v2/models/"+tc.model+"/infer", bytes.NewReader(body.data))
			req.Header = body.header
			resp, err := hc.Do(req)
			must(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length"))
			if resp.StatusCode != 200 || err != nil {
				t.Fatalf("%s: %d %s", tc.model, resp.StatusCode, raw)
			}
			if !bytes.Equal(raw[n:], td.raw) {
				t.Errorf("%s: output %x, sent %x", tc.model, raw[n:], td.raw)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		closed := ln.Addr().String()
		ln.Close()
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"-m", "nope", "-u", addr}, 1, `model "nope": HTTP 404`},
			{[]string{"-m", "simple", "-u", closed}, 1, "cannot reach the server"},
			{[]string{"-m", "simple", "-u", addr, "-b", "9"}, 2, "takes at most 8"},
			{[]string{"-m", "id_nobatch", "-u", addr, "-b", "2"}, 2, "does not batch"},
			{[]string{"-m", "id_fp16", "-u", addr}, 2, "give --shape INPUT0"},
			{[]string{"-m", "id_fp16", "-u", addr, "--shape", "INPUT0:4", "--protocol-json"}, 2, "drop --protocol-json"},
			{[]string{"-m", "simple", "-u", addr, "--shape", "INPUT9:4"}, 2, "no input \"INPUT9\""},
			{[]string{"-m", "simple", "-u", addr, "--shape", "INPUT0:15"}, 2, "does not match the model's [16]"},
			{[]string{"-m", "simple", "-u", addr, "--input-data", "/nonexistent.json"}, 2, "--input-data"},
		} {
			code, stdout, stderr := runPerf(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
				t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q in one line", tc.args, code, stderr, stdout, tc.code, tc.want)
			}
		}
	})
}

// b64Int32 is the base64 of n little-endian INT32 values v.
func b64Int32(n int, v int32) string {
	b := make([]byte, 0, 4*n)
	for range n {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return base64.StdEncoding.EncodeToString(b)
}
