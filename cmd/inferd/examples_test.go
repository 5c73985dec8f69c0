package main

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// The example repositories, as `make run` serves them.
var exampleRepos = []string{"../../examples/model_repository", "../../examples/python_repository"}

// startExamples serves both example repositories over real listeners, with
// the Python models in a python3 that has numpy.
func startExamples(t *testing.T) *running {
	t.Helper()
	args := []string{"--grpc-address=127.0.0.1", "--backend-config=python,python-executable=" + servertest.Python(t)}
	for _, repo := range exampleRepos {
		args = append(args, "--model-repository="+repo)
	}
	r := start(t, args...)
	if r.http == "" {
		t.Fatalf("the server did not start: %v", <-r.done)
	}
	return r
}

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADMECurlExamples runs every curl line the README gives for the
// example models against the server `make run` starts, and wants the
// answers the README shows.
func TestREADMECurlExamples(t *testing.T) {
	readme := readREADME(t)
	r := startExamples(t)
	cases := []struct {
		path, body string
		want       string
		// shown is what the README's line says of the answer ("" when
		// the answer follows in a json block).
		shown []string
	}{
		{
			path: "/v2/models/simple/infer",
			body: `{
  "inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}
  ]}`,
			want: `{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}`,
		},
		{
			path: "/v2/models/identity_fp32/infer",
			body: `{"inputs":[{"name":"INPUT0","shape":[1,3],"datatype":"FP32","data":[1.5,-2,0.25]}]}`,
			want: `{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,3],"data":[1.5,-2.0,0.25]}]}`,
		},
		{
			path: "/v2/models/identity_bytes/infer",
			body: `{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["hello"]}]}`,
			want: `{"model_name":"identity_bytes","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[1,1],"data":["hello"]}]}`,
		},
		{
			path:  "/v2/models/preprocess/infer",
			body:  `{"inputs":[{"name":"RAW","shape":[1,4],"datatype":"FP32","data":[2,4,6,10]}]}`,
			want:  `{"model_name":"preprocess","model_version":"1","outputs":[{"name":"SCALED","datatype":"FP32","shape":[1,4],"data":[0.0,0.25,0.5,1.0]}]}`,
			shown: []string{"[0.0,0.25,0.5,1.0]"},
		},
		{
			path:  "/v2/models/pipeline/infer",
			body:  `{"inputs":[{"name":"RAW","shape":[1,4],"datatype":"FP32","data":[2,4,6,10]}]}`,
			want:  `{"model_name":"pipeline","model_version":"1","outputs":[{"name":"SCORES","datatype":"FP32","shape":[1,2],"data":[10.25,5.0]}]}`,
			shown: []string{"SCORES", "[10.25,5.0]"},
		},
		{
			path: "/v2/models/countdown/generate_stream",
			body: `{"START":3}`,
			want: `data: {"COUNT":3,"model_name":"countdown","model_version":"1"}` + "\n\n" +
				`data: {"COUNT":2,"model_name":"countdown","model_version":"1"}` + "\n\n" +
				`data: {"COUNT":1,"model_name":"countdown","model_version":"1"}` + "\n\n",
			shown: []string{"three events", "`COUNT` 3, 2, 1"},
		},
	}
	for _, c := range cases {
		t.Run(strings.Split(c.path, "/")[3], func(t *testing.T) {
			line := "curl -s localhost:8000" + c.path + " -d '" + c.body + "'"
			at := strings.Index(readme, line)
			if at < 0 {
				t.Fatalf("README.md has no line\n%s", line)
			}
			rest := readme[at+len(line):]
			if end := strings.IndexByte(rest, '\n'); end >= 0 {
				rest = rest[:end]
			}
			for _, s := range c.shown {
				if !strings.Contains(rest, s) {
					t.Errorf("README.md's line for %s does not say %q", c.path, s)
				}
			}
			s, got := post(t, r.http+c.path, c.body)
			if s != 200 || got != c.want {
				t.Errorf("POST %s: %d\n%s\nwant 200\n%s", c.path, s, got, c.want)
			}
		})
	}
}

// TestREADMENamesEveryExample: the README introduces every model of the
// example repositories and gives a tritonclient line for each one a client
// calls.
func TestREADMENamesEveryExample(t *testing.T) {
	readme := readREADME(t)
	for _, repo := range exampleRepos {
		entries, err := os.ReadDir(repo)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !strings.Contains(readme, "`"+e.Name()+"`") {
				t.Errorf("README.md does not name %s", filepath.Join(repo, e.Name()))
			}
		}
	}
	for _, call := range []string{`c.infer("simple"`, `c.infer("identity_fp32"`, `c.infer("identity_bytes"`,
		`c.infer("preprocess"`, `c.infer("pipeline"`, `c.async_stream_infer("countdown"`} {
		if !strings.Contains(readme, call) {
			t.Errorf("README.md has no tritonclient line %s", call)
		}
	}
}

// TestExamplesOverGRPC runs the README's tritonclient.grpc examples as
// their raw calls: countdown over ModelStreamInfer sends COUNT 3, 2, 1 and
// nothing more (no empty final response unless a client asks for one), and
// pipeline answers ModelInfer with the scores the README shows.
func TestExamplesOverGRPC(t *testing.T) {
	r := startExamples(t)
	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	st, err := client.ModelStreamInfer(ctx)
	must(t, err)
	must(t, st.Send(&pb.ModelInferRequest{ModelName: "countdown", Id: "c",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "START", Datatype: "INT32", Shape: []int64{1},
			Contents: &pb.InferTensorContents{IntContents: []int32{3}}}}}))
	must(t, st.CloseSend())
	var counts []int32
	for {
		resp, err := st.Recv()
		if err != nil {
			break
		}
		if msg := resp.GetErrorMessage(); msg != "" {
			t.Fatalf("countdown: %s", msg)
		}
		out := resp.GetInferResponse()
		if out.GetId() != "c" || len(out.GetRawOutputContents()) != 1 || len(out.GetRawOutputContents()[0]) != 4 {
			t.Fatalf("countdown response %v", out)
		}
		counts = append(counts, int32(binary.LittleEndian.Uint32(out.GetRawOutputContents()[0])))
	}
	if len(counts) != 3 || counts[0] != 3 || counts[1] != 2 || counts[2] != 1 {
		t.Errorf("countdown over ModelStreamInfer: %v, want [3 2 1]", counts)
	}

	raw := make([]byte, 0, 16)
	for _, v := range []float32{2, 4, 6, 10} {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	resp, err := client.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "pipeline",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "RAW", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{raw}})
	must(t, err)
	scores := resp.GetRawOutputContents()
	if len(scores) != 1 || len(scores[0]) != 8 {
		t.Fatalf("pipeline over ModelInfer: %v", resp)
	}
	for i, want := range []float32{10.25, 5} {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(scores[0][4*i:])); got != want {
			t.Errorf("pipeline SCORES[%d] = %v, want %v", i, got, want)
		}
	}
}

// TestREADMEChatExamples runs the README's chat and completions lines
// against the example `chat` model (python_repository): the answer, the
// stream's deltas, usage chunk and [DONE], and max_tokens.
func TestREADMEChatExamples(t *testing.T) {
	readme := readREADME(t)
	start := strings.Index(readme, "### OpenAI chat and completions")
	if start < 0 {
		t.Fatal(`README.md has no "### OpenAI chat and completions"`)
	}
	section := readme[start:]
	section = section[:strings.Index(section[4:], "\n### ")+4]
	row := regexp.MustCompile("(?m)^\\| `chat` .*$").FindString(readme)
	lines := regexp.MustCompile(`curl -sN? localhost:8000(/v1/[a-z/]+) -d '([^']*)'`).FindAllStringSubmatch(row+"\n"+section, -1)
	if len(lines) != 4 {
		t.Fatalf("%d chat curl lines found, want 4 (the table's and three)", len(lines))
	}
	r := startExamples(t)
	for _, l := range lines {
		path, body := l[1], l[2]
		status, got := post(t, r.http+path, body)
		if status != 200 {
			t.Errorf("POST %s %s: %d %s", path, body, status, got)
			continue
		}
		var want []string
		switch {
		case strings.Contains(body, `"stream": true`):
			want = []string{`"delta":{"role":"assistant","content":""}`, `"delta":{"content":"You"}`, `"delta":{"content":" there"}`,
				`"finish_reason":"stop"`, `"choices":[],`, `"usage":{"prompt_tokens":`, "data: [DONE]\n\n"}
		case path == "/v1/chat/completions":
			want = []string{`"object":"chat.completion"`, `"content":"You said: hello there"`, `"finish_reason":"stop"`}
		default:
			want = []string{`"object":"text_completion"`, `"text":"You said: good"`, `"finish_reason":"length"`}
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("POST %s %s: %s\nwant it to hold %s", path, body, got, w)
			}
		}
	}
}
