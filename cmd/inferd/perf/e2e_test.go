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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// testModels are served by the in-process inferd: Triton's "simple" (and
// simple_b, the same, so that parallel tests leave simple's statistics to
// the test that checks them), an
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

// startInferd runs the real inferd core and v2 HTTP API on a loopback
// listener and returns its host:port.
func startInferd(t *testing.T) string {
	t.Helper()
	api := httpapi.New(servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, testModels(t))}), httpapi.Options{})
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://")
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

// fast are flags for short runs: 3 windows of 100 ms, and a stability
// band wide enough that three windows always agree.
var fast = []string{"-p", "100", "-s", "1000", "--max-trials", "3"}

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
	addr := startInferd(t)

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
				if !strings.Contains(stdout, "Concurrency") || !strings.Contains(stderr, "concurrency 2: window 3/3") {
					t.Errorf("no table or progress:\n%s\n%s", stdout, stderr)
				}
				rows := readCSV(t, csvPath)
				if len(rows) != 2 {
					t.Fatalf("%d CSV rows, want 2", len(rows))
				}
				for i, row := range rows {
					if row["Concurrency"] != strconv.Itoa(i+1) {
						t.Errorf("row %d: Concurrency %q", i, row["Concurrency"])
					}
					if num(t, row["Inferences/Second"]) <= 0 {
						t.Errorf("row %d: throughput %s", i, row["Inferences/Second"])
					}
					if num(t, row["p50 latency"]) > num(t, row["p99 latency"]) || num(t, row["p50 latency"]) <= 0 {
						t.Errorf("row %d: p50 %s p99 %s", i, row["p50 latency"], row["p99 latency"])
					}
					for _, col := range []string{"Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output"} {
						if v, ok := row[col]; !ok || v == "" || num(t, v) < 0 {
							t.Errorf("row %d: %s = %q", i, col, v)
						}
					}
					if row["Errors"] != "0" {
						t.Errorf("row %d: %s errors", i, row["Errors"])
					}
				}
				var rep report
				b, err := os.ReadFile(jsonPath)
				must(t, err)
				must(t, json.Unmarshal(b, &rep))
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
					if !r.Stable || r.Windows != 3 || r.Throughput <= 0 || r.P50 > r.P99 || r.Avg <= 0 {
						t.Errorf("result %+v", r)
					}
				}
			})
		}
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
		for i, row := range rows {
			rate := num(t, row["Request Rate"])
			if rate != float64(100*(i+1)) {
				t.Errorf("row %d: rate %v", i, rate)
			}
			// An open loop sends on schedule: throughput follows the rate.
			if got := num(t, row["Inferences/Second"]); got < rate*0.6 || got > rate*1.4 {
				t.Errorf("rate %v: throughput %v", rate, got)
			}
			if _, ok := row["Delayed Requests"]; !ok {
				t.Error("no Delayed Requests column")
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
				var rep report
				b, err := os.ReadFile(jsonPath)
				must(t, err)
				must(t, json.Unmarshal(b, &rep))
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
		for _, extra := range [][]string{nil, {"--protocol-json"}, {"-b", "3"}} {
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
