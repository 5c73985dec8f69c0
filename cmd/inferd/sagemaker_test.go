package main

import (
	"bytes"
	"context"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/internal/onnxbuild"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
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
//
// gRPC follows Triton's SageMaker default: off, even with
// SAGEMAKER_TRITON_GRPC_PORT set, and on with SAGEMAKER_TRITON_ALLOW_GRPC.
func TestSageMakerServe(t *testing.T) {
	for _, allowGRPC := range []bool{false, true} {
		t.Run("grpc="+strconv.FormatBool(allowGRPC), func(t *testing.T) { sageMakerServe(t, allowGRPC) })
	}
}

func sageMakerServe(t *testing.T, allowGRPC bool) {
	modelDir := t.TempDir()
	writeModel(t, modelDir, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	port, grpcPort := freePort(t), freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGS=serve",
		"INFERD_SAGEMAKER_MODEL_DIR="+modelDir, "SAGEMAKER_BIND_TO_PORT="+strconv.Itoa(port),
		"SAGEMAKER_TRITON_GRPC_PORT="+strconv.Itoa(grpcPort), "SAGEMAKER_TRITON_ALLOW_GRPC="+strconv.FormatBool(allowGRPC))
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
	grpcAddr := "127.0.0.1:" + strconv.Itoa(grpcPort)
	if allowGRPC {
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		must(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		in := make([]byte, 64)
		resp, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "simple",
			Inputs: []*pb.ModelInferRequest_InferInputTensor{
				{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
				{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
			},
			RawInputContents: [][]byte{in, in},
		}, grpc.WaitForReady(true))
		if err != nil || len(resp.GetRawOutputContents()) != 2 {
			t.Fatalf("gRPC ModelInfer under serve: %v %v", resp, err)
		}
	} else if c, err := net.Dial("tcp", grpcAddr); err == nil {
		c.Close()
		t.Fatalf("gRPC listens on %s without SAGEMAKER_TRITON_ALLOW_GRPC", grpcAddr)
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
