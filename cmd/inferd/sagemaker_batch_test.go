package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// TestSageMakerBatchServe runs `inferd serve` as a transform job does
// (SAGEMAKER_BATCH and the job's settings in the environment) with
// metrics asked on the serving port: /execution-parameters reports the
// job's payload size, which also raised --http-max-input-size; a
// jsonlines body is answered line for line; /metrics counts the lines.
func TestSageMakerBatchServe(t *testing.T) {
	modelDir := t.TempDir()
	writeModel(t, modelDir, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGS=serve",
		"INFERD_SAGEMAKER_MODEL_DIR="+modelDir, "SAGEMAKER_BIND_TO_PORT="+strconv.Itoa(port),
		"SAGEMAKER_BATCH=true", "SAGEMAKER_MAX_PAYLOAD_IN_MB=100", "SAGEMAKER_BATCH_STRATEGY=MULTI_RECORD",
		"SAGEMAKER_TRITON_METRICS_PATH=/metrics")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s, _ := get("/ping"); s == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ping never answered 200; stderr:\n%s", stderr.String())
		}
	}
	if s, body := get("/execution-parameters"); s != 200 || body != `{"MaxConcurrentTransforms":1,"BatchStrategy":"MULTI_RECORD","MaxPayloadInMB":100}` {
		t.Errorf("/execution-parameters: %d %s", s, body)
	}
	line := `{"instances":[{"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	resp, err := http.Post(base+"/invocations", "application/jsonlines", strings.NewReader(line+"\n"+line+"\n"))
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pred := `{"predictions":[{"OUTPUT0":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"OUTPUT1":[-1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]}]}`
	if resp.StatusCode != 200 || string(b) != pred+"\n"+pred+"\n" || resp.Header.Get("Content-Type") != "application/jsonlines" {
		t.Errorf("/invocations jsonlines: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	success := regexp.MustCompile(`(?m)^nv_inference_request_success\{[^}]*model="simple"[^}]*\} 2$`)
	if s, body := get("/metrics"); s != 200 || !success.MatchString(body) {
		t.Errorf("/metrics: %d\n%s", s, body)
	}
}
