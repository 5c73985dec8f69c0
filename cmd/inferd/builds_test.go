package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cloudBuilds are the per-cloud builds (builds.go) with what their
// dependency lists must lack and keep, and what each must refuse.
var cloudBuilds = []struct {
	name, tag string
	// absent and present are import paths in `go list -deps`.
	absent, present []string
	// args start the smoke server beside the repository and ports.
	args []string
	// refused are command lines, each alone, that must fail naming the
	// build; env, when set, is added to the refused runs' environment.
	refused [][]string
	// mode serves the example's request in the build's platform mode.
	mode func(t *testing.T, bin, repo string)
}{
	{
		name: "inferd-sagemaker", tag: "inferd_sagemaker",
		absent: []string{"cloud.google.com/go/storage", "google.golang.org/grpc/xds", "github.com/Azure/azure-sdk-for-go/sdk/azcore",
			"github.com/inferd/inferd/platforms/grpcapi", "github.com/inferd/inferd/vertex", "github.com/inferd/inferd/platforms/lambda",
			"github.com/inferd/inferd/cmd/inferd/perf", "github.com/inferd/inferd/repo/gcs", "github.com/inferd/inferd/repo/as",
			"github.com/redis/go-redis/v9", "github.com/inferd/inferd/core/cache/redis"},
		present: []string{"github.com/inferd/inferd/repo/s3", "github.com/inferd/inferd/sagemaker", "github.com/inferd/inferd/core/cache"},
		args:    []string{"--allow-grpc=false"}, // what Triton's SageMaker serve script passes
		refused: [][]string{{"--model-repository=gs://bucket/models"}, {"--model-repository=as://account/container/models"},
			{"--grpc-port=8001"}, {"--allow-vertex-ai=true"}, {"perf"}, {"--cache-config=redis,host=localhost"}},
		mode: smokeSageMaker,
	},
	{
		name: "inferd-vertex", tag: "inferd_vertex",
		absent: []string{"github.com/aws/aws-sdk-go-v2/service/s3", "github.com/Azure/azure-sdk-for-go/sdk/azcore",
			"github.com/inferd/inferd/platforms/lambda", "github.com/inferd/inferd/cmd/inferd/perf", "github.com/inferd/inferd/repo/s3",
			"github.com/inferd/inferd/repo/as", "github.com/redis/go-redis/v9"},
		present: []string{"github.com/inferd/inferd/repo/gcs", "github.com/inferd/inferd/platforms/grpcapi", "github.com/inferd/inferd/vertex"},
		args:    []string{"--grpc-port=0", "--grpc-address=127.0.0.1"},
		refused: [][]string{{"--model-repository=s3://bucket/models"}, {"--model-repository=as://account/container/models"},
			{"--allow-sagemaker=true"}, {"serve"}, {"--cache-config=redis,host=localhost"}},
		mode: smokeVertex,
	},
	{
		name: "inferd-lambda", tag: "lambda.norpc,inferd_lambda", // as make build-lambda and the image
		absent: []string{"cloud.google.com/go/storage", "google.golang.org/grpc/xds", "github.com/Azure/azure-sdk-for-go/sdk/azcore",
			"github.com/inferd/inferd/platforms/grpcapi", "github.com/inferd/inferd/vertex", "github.com/inferd/inferd/cmd/inferd/perf",
			"github.com/inferd/inferd/repo/gcs", "github.com/inferd/inferd/repo/as", "github.com/redis/go-redis/v9", "net/rpc"},
		present: []string{"github.com/inferd/inferd/repo/s3", "github.com/inferd/inferd/platforms/lambda"},
		args:    []string{"--allow-grpc=false"},
		refused: [][]string{{"--model-repository=gs://bucket/models"}, {"--grpc-port=8001"}, {"--allow-sagemaker=true"}, {"serve"},
			{"--cache-config=redis,host=localhost"}},
		mode: smokeLambda,
	},
}

func goTool(t *testing.T) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		g = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	return g
}

// TestBuildDependencies checks that each per-cloud build really leaves
// its parts out: the packages are gone from its dependency list, not
// merely unused.
func TestBuildDependencies(t *testing.T) {
	for _, b := range cloudBuilds {
		t.Run(b.name, func(t *testing.T) {
			out, err := exec.Command(goTool(t), "list", "-deps", "-tags", b.tag, ".").Output()
			if err != nil {
				t.Fatalf("go list -deps -tags %s: %v", b.tag, err)
			}
			deps := strings.Fields(string(out))
			for _, p := range b.absent {
				if slices.Contains(deps, p) {
					t.Errorf("%s is in the %s build", p, b.name)
				}
			}
			for _, p := range b.present {
				if !slices.Contains(deps, p) {
					t.Errorf("%s is not in the %s build", p, b.name)
				}
			}
		})
	}
}

// TestBuildSmoke builds each per-cloud binary and checks it starts, gets
// ready and answers an inference on the example repository, and refuses
// what it leaves out with an error naming the build, never a panic.
func TestBuildSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	repo, err := filepath.Abs("../../examples/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, b := range cloudBuilds {
		t.Run(b.name, func(t *testing.T) {
			bin := filepath.Join(dir, b.name)
			if out, err := exec.Command(goTool(t), "build", "-tags", b.tag, "-o", bin, ".").CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %s: %v\n%s", b.tag, err, out)
			}
			for _, args := range b.refused {
				checkRefused(t, bin, b.name, append(args, "--model-repository="+repo))
			}
			cmd := exec.Command(bin, "--model-repository="+repo, "--version")
			if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "inferd ") {
				t.Errorf("--version: %q, %v", out, err)
			}
			base := smokeStart(t, bin, nil, "http", append([]string{"--model-repository=" + repo, "--http-address=127.0.0.1", "--http-port=0", "--metrics-port=0"}, b.args...)...)
			smokeInfer(t, base+"/v2/health/ready", base+"/v2/models/simple/infer")
			b.mode(t, bin, repo)
		})
	}
}

// checkRefused runs bin with args and wants a clean failure whose message
// names the build.
func checkRefused(t *testing.T, bin, build string, args []string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || exit.ExitCode() > 2 {
		t.Errorf("%v: want exit 1 or 2, got %v\n%s", args, err, stderr.String())
		return
	}
	msg := stderr.String()
	if !strings.Contains(msg, "is not in this build: the "+build+" build leaves it out") || strings.Contains(msg, "panic") {
		t.Errorf("%v: stderr does not name the build:\n%s", args, msg)
	}
}

// smokeStart starts bin with args and env and returns the base URL of the
// listener named key in its "serving" log line.
func smokeStart(t *testing.T, bin string, env []string, key string, args ...string) string {
	t.Helper()
	_, base, _ := startServing(t, bin, env, key, args)
	return base
}

const smokeRequest = `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},` +
	`{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

// smokeInfer wants ready to answer 200 and infer to answer smokeRequest
// with `simple`'s sum (OUTPUT0 = INPUT0 + INPUT1).
func smokeInfer(t *testing.T, ready, infer string) {
	t.Helper()
	resp, err := http.Get(ready)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ready: %s", resp.Status)
	}
	resp, err = http.Post(infer, "application/json", strings.NewReader(smokeRequest))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("infer: %s, %v: %s", resp.Status, err, body)
	}
	checkSum(t, string(body))
}

// checkSum wants body to be `simple`'s answer to smokeRequest.
func checkSum(t *testing.T, body string) {
	t.Helper()
	var got struct {
		Outputs []struct {
			Name string  `json:"name"`
			Data []int32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("infer: %v: %s", err, body)
	}
	for _, o := range got.Outputs {
		if o.Name == "OUTPUT0" {
			if len(o.Data) != 16 || o.Data[0] != 1 || o.Data[15] != 16 {
				t.Errorf("OUTPUT0 = %v, want 1..16", o.Data)
			}
			return
		}
	}
	t.Errorf("no OUTPUT0 in %+v", got)
}

// freeTCPPort is a port nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// smokeSageMaker runs `serve` as SageMaker does, on repo as the model
// folder: /ping, then /invocations.
func smokeSageMaker(t *testing.T, bin, repo string) {
	port := freeTCPPort(t)
	base := smokeStart(t, bin, []string{"SAGEMAKER_BIND_TO_PORT=" + fmt.Sprint(port), "INFERD_SAGEMAKER_MODEL_DIR=" + repo,
		"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=simple"}, "sagemaker", "serve")
	smokeInfer(t, base+"/ping", base+"/invocations")
}

// smokeVertex runs in Vertex AI's environment: the health and predict
// routes on AIP_HTTP_PORT, the repository from AIP_STORAGE_URI.
func smokeVertex(t *testing.T, bin, repo string) {
	port := freeTCPPort(t)
	base := smokeStart(t, bin, []string{"AIP_MODE=PREDICTION", "AIP_HTTP_PORT=" + fmt.Sprint(port), "AIP_STORAGE_URI=" + repo,
		"AIP_HEALTH_ROUTE=/health", "AIP_PREDICT_ROUTE=/predict"}, "vertex_ai", "--vertex-ai-default-model=simple", "--metrics-port=0")
	smokeInfer(t, base+"/health", base+"/predict")
}

// smokeLambda runs under a fake Lambda Runtime API (lambda_test.go) that
// hands out one Function URL event carrying smokeRequest.
func smokeLambda(t *testing.T, bin, repo string) {
	api := &fakeRuntimeAPI{events: []string{functionURLEvent(t, smokeRequest)}, responses: make(chan string, 4)}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cmd := exec.Command(bin, "--model-repository="+repo, "--log-info=false")
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case resp := <-api.responses:
		var got struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal([]byte(resp), &got); err != nil || got.StatusCode != http.StatusOK {
			t.Fatalf("Lambda answered %q (%v)", resp, err)
		}
		checkSum(t, got.Body)
	case <-time.After(time.Minute):
		t.Fatal("no response reached the Runtime API")
	}
}
