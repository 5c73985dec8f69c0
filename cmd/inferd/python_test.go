package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// TestSeedModelPy runs the user guide's model.py itself, read from the
// seed document beside the project (never copied into it), as the first
// step of the same pipeline. Its tokenizer writes input_ids as [1, 128],
// as testdata/pipeline's does.
func TestSeedModelPy(t *testing.T) {
	seed, err := os.ReadFile("../../../shared/seeds/triton-skill.md")
	if err != nil {
		t.Skip("the seed documents are not beside this checkout:", err)
	}
	const marker = "# model_repository/preprocess/1/model.py"
	at := strings.Index(string(seed), marker)
	if at < 0 {
		t.Fatal("no model.py in the seed")
	}
	code := string(seed[at:])
	code = code[:strings.Index(code, "```")]
	root := pipelineRepo(t)
	must(t, os.WriteFile(filepath.Join(root, "preprocess", "1", "model.py"), []byte(code), 0o644))
	r := start(t, "--model-repository="+root, "--backend-config=python,python-executable="+servertest.Python(t))
	const text = "hello"
	want := expectedLogits(text)
	body := `{"inputs":[{"name":"raw_text","shape":[1],"datatype":"BYTES","data":["` + text + `"]},` +
		`{"name":"attention_mask","shape":[1,128],"datatype":"INT64","data":[` + strings.TrimSuffix(strings.Repeat("1,", 128), ",") + `]}]}`
	s, out := post(t, r.http+"/v2/models/ensemble_pipeline/infer", body)
	if s != 200 || !strings.Contains(out, `"data":[`+strconv.FormatFloat(float64(want[0]), 'f', 1, 32)+`,`) {
		t.Fatalf("seed model.py: %d %s, want %v", s, out, want)
	}
}
