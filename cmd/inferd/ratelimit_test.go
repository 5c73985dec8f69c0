package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// globalR is an instance group of one CPU instance that needs the global
// resource R (count n) under the rate limiter.
func globalR(n int) string {
	return fmt.Sprintf("instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: \"R\" global: true count: %d } ] } } ]\n", n)
}

// TestRateLimitONNX serves ONNX models under --rate-limit=execution_count
// over HTTP: concurrent requests to a dynamic batching model and to a
// model without batching, which share a global resource, all answer, and
// a sequence on a rate-limited stateful model keeps its running sum.
func TestRateLimitONNX(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "batched", `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
`+globalR(1), onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4)))
	writeModel(t, root, "single", `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`+globalR(1), onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, 4)))
	acc := strings.Replace(onnxbuild.AccumulatorConfig(onnxbuild.Int32), "instance_group [ { kind: KIND_CPU count: 1 } ]\n", globalR(1), 1)
	writeModel(t, root, "acc", acc, onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)))
	r := start(t, "--model-repository="+root, "--rate-limit=execution_count")

	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 16 {
		wg.Go(func() {
			model, shape := "batched", "[1,4]"
			if i%2 == 1 {
				model, shape = "single", "[4]"
			}
			body := fmt.Sprintf(`{"inputs":[{"name":"INPUT0","shape":%s,"datatype":"FP32","data":[%d,1,2,3]}]}`, shape, i)
			want := fmt.Sprintf(`"data":[%d.0,1.0,2.0,3.0]`, i)
			if s, b := post(t, r.http+"/v2/models/"+model+"/infer", body); s != 200 || !strings.Contains(b, want) {
				errs <- fmt.Sprintf("%s request %d: %d %s", model, i, s, b)
			}
		})
	}
	for i, x := range []int{5, 6, 7} {
		want := fmt.Sprintf(`"data":[%d]`, []int{5, 11, 18}[i])
		if s, b := post(t, r.http+"/v2/models/acc/infer", accStep(3, x, i == 0, i == 2)); s != 200 || !strings.Contains(b, want) {
			t.Errorf("sequence step %d: %d %s, want %s", i, s, b, want)
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestRateLimitLoadErrors: a count given on the command line below what a
// model needs fails its load in Triton's words (the index reason at
// start, 400 on an explicit load); --rate-limit=off loads it.
func TestRateLimitLoadErrors(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "greedy", `platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`+globalR(2), onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, 4)))
	const want = `Resource count for \"R\" is limited to 1 which will prevent scheduling of one or more model instances, the minimum required count is 2`

	r := start(t, "--model-repository="+root, "--rate-limit=execution_count", "--rate-limit-resource=R:1", "--exit-on-error=false")
	if s, b := post(t, r.http+"/v2/repository/index", ""); s != 200 || !strings.Contains(b, want) {
		t.Errorf("index: %d %s, want the reason %s", s, b, want)
	}

	r = start(t, "--model-repository="+root, "--model-control-mode=explicit", "--rate-limit=execution_count", "--rate-limit-resource=R:1:0", "--grpc-address=127.0.0.1")
	if s, b := post(t, r.http+"/v2/repository/models/greedy/load", ""); s != 400 || !strings.Contains(b, `load failed for model 'greedy'`) || !strings.Contains(b, want) {
		t.Errorf("load: %d %s, want 400 with %s", s, b, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := grpcClient(t, r).RepositoryModelLoad(ctx, &pb.RepositoryModelLoadRequest{ModelName: "greedy"})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), strings.ReplaceAll(want, `\"`, `"`)) {
		t.Errorf("gRPC load: %v, want INVALID_ARGUMENT with %s", err, want)
	}

	for _, args := range [][]string{{"--rate-limit=execution_count", "--rate-limit-resource=R:2"}, {"--rate-limit=off", "--rate-limit-resource=R:1"}, {"--rate-limit-resource=R:1"}} {
		r := start(t, append([]string{"--model-repository=" + root}, args...)...)
		if s, _ := get(t, r.http+"/v2/models/greedy/ready"); s != 200 {
			t.Errorf("%v: greedy not ready", args)
		}
	}
}

// TestRateLimitCommandLine: bad --rate-limit and --rate-limit-resource
// values stop the start in Triton's words.
func TestRateLimitCommandLine(t *testing.T) {
	tests := []struct {
		arg, want string
	}{
		{"--rate-limit=sometimes", "invalid argument for --rate-limit"},
		{"--rate-limit-resource=R", "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R"},
		{"--rate-limit-resource=R:x", "Invalid option value. Got x"},
	}
	for _, tt := range tests {
		_, err := parseFlags([]string{tt.arg}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.arg, err, tt.want)
		}
	}
}

// rateLimitedPy is a model.py that sleeps in each execution and appends
// "<model> <start> <end>" (nanoseconds) to log.
func rateLimitedPy(log string) string {
	return `import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        start = time.time_ns()
        time.sleep(0.5)
        end = time.time_ns()
        with open(` + strconv.Quote(log) + `, "a") as f:
            f.write(f"{self.name} {start} {end}\n")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())]) for r in requests]
`
}

// TestRateLimitPython: two model.py models whose instances need the one
// global resource R never execute at the same time under
// --rate-limit=execution_count, over HTTP, while with --rate-limit=off
// they do.
func TestRateLimitPython(t *testing.T) {
	py := servertest.Python(t)
	for _, mode := range []string{"execution_count", "off"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			log := filepath.Join(t.TempDir(), "executions.log")
			for _, name := range []string{"p1", "p2"} {
				writeModel(t, root, name, `backend: "python"
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`+globalR(1), nil)
				must(t, os.WriteFile(filepath.Join(root, name, "1", "model.py"), []byte(rateLimitedPy(log)), 0o644))
			}
			r := start(t, "--model-repository="+root, "--rate-limit="+mode, "--backend-config=python,python-executable="+py)
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					model := []string{"p1", "p2"}[i%2]
					if s, b := post(t, r.http+"/v2/models/"+model+"/infer", fmt.Sprintf(`{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[%d]}]}`, i)); s != 200 || !strings.Contains(b, fmt.Sprintf(`"data":[%d]`, i)) {
						t.Errorf("%s: %d %s", model, s, b)
					}
				})
			}
			wg.Wait()
			data, err := os.ReadFile(log)
			must(t, err)
			type span struct {
				model      string
				start, end int64
			}
			var spans []span
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var s span
				if _, err := fmt.Sscan(line, &s.model, &s.start, &s.end); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				spans = append(spans, s)
			}
			if len(spans) != 4 {
				t.Fatalf("%d executions logged, want 4:\n%s", len(spans), data)
			}
			slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
			overlaps := 0
			for i := 1; i < len(spans); i++ {
				if spans[i].start < spans[i-1].end {
					overlaps++
				}
			}
			switch {
			case mode == "execution_count" && overlaps > 0:
				t.Errorf("executions overlapped while each needs the only R: %+v", spans)
			case mode == "off" && overlaps == 0:
				t.Errorf("with rate limiting off the two models never ran at once: %+v", spans)
			}
		})
	}
}
