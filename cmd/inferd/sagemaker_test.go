package main

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestSageMakerServe runs `inferd serve` as SageMaker does: a child process
// with the platform's environment and /opt/ml/model replaced by a temp dir.
// It answers /ping and /invocations (JSON and the binary+json content
// type), and drains on SIGTERM with exit 0.
func TestSageMakerServe(t *testing.T) {
	modelDir := t.TempDir()
	writeModel(t, modelDir, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGS=serve",
		"INFERD_SAGEMAKER_MODEL_DIR="+modelDir, "SAGEMAKER_BIND_TO_PORT="+strconv.Itoa(port))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ping never answered 200; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, body := post(t, base+"/invocations", readmeExample); s != 200 || !strings.Contains(body, `"model_name":"simple"`) {
		t.Fatalf("/invocations JSON: %d %s", s, body)
	}
	// Binary+json: a JSON header of N bytes, then the raw INT32 tensors.
	header := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}}]}`
	body := []byte(header)
	for _, v := range []int32{1, 1} {
		for range 16 {
			body = binary.LittleEndian.AppendUint32(body, uint32(v))
		}
	}
	resp, err := http.Post(base+"/invocations", "application/vnd.sagemaker-triton.binary+json;json-header-size="+strconv.Itoa(len(header)), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(out.String(), `"data":[2,2,2`) {
		t.Fatalf("/invocations binary+json: %d %s", resp.StatusCode, out.String())
	}
	if _, err := os.Stat(filepath.Join(modelDir, "simple")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}
