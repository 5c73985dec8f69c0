package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// pipelineRepo is testdata/pipeline (a model.py tokenizer, an ONNX text
// classifier and the user guide's ensemble of the two) in a fresh
// repository, with the classifier's ONNX file and the ensemble's version
// folder made here.
func pipelineRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.CopyFS(root, os.DirFS("testdata/pipeline")))
	must(t, os.MkdirAll(filepath.Join(root, "ensemble_pipeline", "1"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "text_classifier", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "text_classifier", "1", "model.onnx"), onnxbuild.Must(onnxbuild.TextClassifier(128)), 0o644))
	return root
}

// expectedLogits computes the classifier's answer for text with an
// all-ones mask.
func expectedLogits(text string) [2]float32 {
	w := onnxbuild.TextClassifierWeights(128)
	var out [2]float32
	for i, c := range []rune(text) {
		if i >= 128 {
			break
		}
		out[0] += float32(c) * float32(w[2*i])
		out[1] += float32(c) * float32(w[2*i+1])
	}
	return out
}

// TestPythonPipeline serves a model.py tokenizer as the first step of an
// ensemble whose second step is an ONNX classifier, through the binary's
// HTTP and gRPC listeners, with the real interpreter.
func TestPythonPipeline(t *testing.T) {
	r := start(t, "--model-repository="+pipelineRepo(t), "--grpc-address=127.0.0.1",
		"--backend-config=python,python-executable="+servertest.Python(t))
	const text = "Triton models, unchanged"
	want := expectedLogits(text)
	ones := "[" + strings.TrimSuffix(strings.Repeat("1,", 128), ",") + "]"
	body := `{"inputs":[{"name":"raw_text","shape":[1],"datatype":"BYTES","data":["` + text + `"]},` +
		`{"name":"attention_mask","shape":[1,128],"datatype":"INT64","data":` + ones + `}]}`
	s, out := post(t, r.http+"/v2/models/ensemble_pipeline/infer", body)
	if s != 200 {
		t.Fatalf("HTTP: %d %s", s, out)
	}
	var resp struct {
		Outputs []struct {
			Name string    `json:"name"`
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	must(t, json.Unmarshal([]byte(out), &resp))
	if len(resp.Outputs) != 1 || resp.Outputs[0].Data[0] != want[0] || resp.Outputs[0].Data[1] != want[1] {
		t.Fatalf("HTTP logits %s, want %v", out, want)
	}

	checkPipelineGRPC(t, r.addrs["GRPC"], text, want)
}

// checkPipelineGRPC runs text through ensemble_pipeline over gRPC, raw
// tensors, and wants the classifier's logits.
func checkPipelineGRPC(t *testing.T, addr, text string, want [2]float32) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mask := make([]byte, 0, 8*128)
	for range 128 {
		mask = binary.LittleEndian.AppendUint64(mask, 1)
	}
	raw := binary.LittleEndian.AppendUint32(nil, uint32(len(text)))
	raw = append(raw, text...)
	g, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "ensemble_pipeline",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "raw_text", Datatype: "BYTES", Shape: []int64{1}},
			{Name: "attention_mask", Datatype: "INT64", Shape: []int64{1, 128}},
		},
		RawInputContents: [][]byte{raw, mask},
	})
	must(t, err)
	logits := g.GetRawOutputContents()[0]
	for i := range 2 {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(logits[4*i:])); got != want[i] {
			t.Fatalf("gRPC logits[%d] = %v, want %v", i, got, want[i])
		}
	}
}

// pythonModelsRepo copies models of core/python's testdata into a fresh
// repository.
func pythonModelsRepo(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range names {
		must(t, os.CopyFS(filepath.Join(root, n), os.DirFS(filepath.Join("..", "..", "core", "python", "testdata", "models", n))))
	}
	return root
}

// TestPythonDecoupledStreams: a decoupled model.py streams 1,000
// responses over gRPC ModelStreamInfer and HTTP generate_stream, through
// the binary's listeners.
func TestPythonDecoupledStreams(t *testing.T) {
	r := start(t, "--model-repository="+pythonModelsRepo(t, "repeat"), "--grpc-address=127.0.0.1",
		"--backend-config=python,python-executable="+servertest.Python(t))
	const n = 1000
	vals := make([]byte, 0, 4*n)
	for i := range n {
		vals = binary.LittleEndian.AppendUint32(vals, uint32(i))
	}
	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := pb.NewGRPCInferenceServiceClient(conn).ModelStreamInfer(ctx)
	must(t, err)
	must(t, st.Send(&pb.ModelInferRequest{ModelName: "repeat", Id: "r",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "INT32", Shape: []int64{n}}}, RawInputContents: [][]byte{vals}}))
	must(t, st.CloseSend())
	got := 0
	for {
		resp, err := st.Recv()
		if err != nil {
			break
		}
		if resp.GetErrorMessage() != "" {
			t.Fatal(resp.GetErrorMessage())
		}
		if v := binary.LittleEndian.Uint32(resp.GetInferResponse().GetRawOutputContents()[0]); v != uint32(got) {
			t.Fatalf("gRPC response %d carries %d", got, v)
		}
		got++
	}
	if got != n {
		t.Fatalf("gRPC: %d responses, want %d", got, n)
	}
	s, body := post(t, r.http+"/v2/models/repeat/generate_stream", `{"IN":`+intList(n)+`}`)
	if s != 200 || strings.Count(body, "data: ") != n || !strings.Contains(body, `"OUT":999`) {
		t.Fatalf("generate_stream: %d, %d events", s, strings.Count(body, "data: "))
	}
}

func intList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestNoOrphanWorkers: killing the server with SIGKILL leaves no Python
// worker running: each dies with it.
func TestNoOrphanWorkers(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	argv, _ := json.Marshal([]string{"--model-repository=" + pythonModelsRepo(t, "add_sub"), "--http-port=0", "--grpc-port=0", "--metrics-port=0",
		"--backend-config=python,python-executable=" + servertest.Python(t)})
	// The killed server cannot remove its temporary folder: keep it in
	// the test's.
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGV="+string(argv), "TMPDIR="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), `] "serving" `) {
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	workers := servertest.Children(cmd.Process.Pid)
	if len(workers) == 0 {
		t.Fatal("no Python worker running")
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := 0
		for _, pid := range workers {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers outlived the server", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kvModel is a model.py that exports TensorRT-LLM's KV-cache family
// through custom metrics, as a Python LLM server can, and echoes its text.
const kvModel = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        kv = pb_utils.MetricFamily("nv_trt_llm_kv_cache_block_metrics", "KV cache blocks", pb_utils.MetricFamily.GAUGE)
        for kind, value in (("tokens_per", 64), ("used", 3), ("max", 4)):
            kv.Metric(labels={"kv_cache_block_type": kind}).set(value)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("text_output", r.inputs()[0].as_numpy())]) for r in requests]
`

// TestPythonKVCacheReport: a model.py's KV-cache metrics become Triton's
// ORCA report on /generate (triton-inference-server/server
// src/orca_http.cc), through the binary.
func TestPythonKVCacheReport(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "llm", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "llm", "1", "model.py"), []byte(kvModel), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "llm", "config.pbtxt"), []byte(`backend: "python"
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
`), 0o644))
	r := start(t, "--model-repository="+root, "--backend-config=python,python-executable="+servertest.Python(t))
	for _, tc := range []struct{ format, want string }{
		{"json", `JSON {"named_metrics":{"kv_cache_utilization":0.75,"max_token_capacity":256}}`},
		{"text", `TEXT named_metrics.kv_cache_utilization=0.750000, named_metrics.max_token_capacity=256`},
	} {
		req, err := http.NewRequest("POST", r.http+"/v2/models/llm/generate", strings.NewReader(`{"text_input":"hello"}`))
		must(t, err)
		req.Header.Set("endpoint-load-metrics-format", tc.format)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"text_output":"hello"`) {
			t.Fatalf("%s: %d %s", tc.format, resp.StatusCode, body)
		}
		if got := resp.Header.Get("endpoint-load-metrics"); got != tc.want {
			t.Errorf("%s: endpoint-load-metrics %q, want %q", tc.format, got, tc.want)
		}
	}
}
