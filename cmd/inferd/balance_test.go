package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // weighted_round_robin
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// slowSimple is a model.py "simple" (the example's add and subtract) that
// sleeps 50 ms per request: the same model, far slower per request.
const slowSimple = `import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep(0.05)
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", (a + b).astype(np.int32)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(np.int32))]))
        return responses
`

const slowSimpleConfig = `name: "simple"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`

// TestWeightedRoundRobin starts three inferd processes serving "simple",
// one of them a model.py 50 ms per request, and drives them from one
// grpc-go client: round_robin gives the slow one a third of the calls,
// weighted_round_robin far fewer, whether it reads the per-call trailer
// (the default on every call) or the out-of-band OpenRcaService.
func TestWeightedRoundRobin(t *testing.T) {
	slowRepo := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(slowRepo, "simple", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(slowRepo, "simple", "config.pbtxt"), []byte(slowSimpleConfig), 0o644))
	must(t, os.WriteFile(filepath.Join(slowRepo, "simple", "1", "model.py"), []byte(slowSimple), 0o644))

	python := "--backend-config=python,python-executable=" + servertest.Python(t)
	repos := []string{slowRepo, "../../examples/model_repository", "../../examples/model_repository"}
	addrs := make([]string, len(repos))
	var wg sync.WaitGroup
	for i, repo := range repos {
		wg.Add(1)
		go func() { defer wg.Done(); addrs[i] = startProcess(t, repo, python) }()
	}
	wg.Wait()
	for _, a := range addrs {
		if a == "" {
			t.FailNow()
		}
	}
	slow := addrs[0]

	for _, c := range []struct {
		name   string
		policy string
		lo, hi float64 // the slow one's share of the calls
	}{
		{"round_robin", `{"round_robin":{}}`, 0.28, 0.39},
		{"weighted per call", `{"weighted_round_robin":{"blackoutPeriod":"0s","weightUpdatePeriod":"0.1s"}}`, 0, 0.15},
		{"weighted out of band", `{"weighted_round_robin":{"enableOobLoadReport":true,"oobReportingPeriod":"1s","blackoutPeriod":"0s","weightUpdatePeriod":"0.1s"}}`, 0, 0.15},
	} {
		t.Run(c.name, func(t *testing.T) {
			share, calls := slowShare(t, addrs, slow, `{"loadBalancingConfig":[`+c.policy+`]}`)
			t.Logf("slow server's share %.3f of %d calls", share, calls)
			if share < c.lo || share > c.hi {
				t.Fatalf("slow server's share %.3f of %d calls; want %.2f to %.2f", share, calls, c.lo, c.hi)
			}
		})
	}
}

// startProcess starts inferd as a process on repo with args and returns
// its gRPC address; the process is killed at the test's end.
func startProcess(t *testing.T, repo, args string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1",
		"INFERD_TEST_ARGS=--model-repository="+repo+" --http-port=0 --metrics-port=0 --grpc-port=0 --http-address=127.0.0.1 --grpc-address=127.0.0.1 "+args)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Error(err)
		return ""
	}
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return ""
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	var log strings.Builder
	go func() {
		addr := regexp.MustCompile(`"serving" .*grpc=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addr.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
			log.WriteString(sc.Text() + "\n")
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Errorf("inferd on %s exited before serving:\n%s", repo, log.String())
		}
		go func() { // keep the pipe drained
			for range found {
			}
		}()
		return a
	case <-time.After(60 * time.Second):
		t.Errorf("inferd on %s did not start", repo)
		return ""
	}
}

// slowShare drives the servers at addrs for 4 s with 8 concurrent
// callers under serviceConfig and returns slow's share of the calls begun
// after the first second (when weights have settled). A call counts by
// when it began, which is when the balancer picked its server, and every
// call begun is awaited: counted by when they ended, the slow server's
// calls in flight at either edge of the window weigh on its share by as
// much as the machine slows it, which on a busy machine with few calls
// moved round_robin's share well off its third.
func slowShare(t *testing.T, addrs []string, slow, serviceConfig string) (float64, int) {
	t.Helper()
	r := manual.NewBuilderWithScheme("balance")
	var state resolver.State
	for _, a := range addrs {
		state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r.InitialState(state)
	conn, err := grpc.NewClient(r.Scheme()+":///inferd", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(serviceConfig))
	must(t, err)
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	in := &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
	}}
	start := time.Now()
	settled, end := start.Add(time.Second), start.Add(4*time.Second)
	var mu sync.Mutex
	var total, toSlow int
	var firstErr error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				began := time.Now()
				if !began.Before(end) {
					return
				}
				var p peer.Peer
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := client.ModelInfer(ctx, in, grpc.Peer(&p))
				cancel()
				mu.Lock()
				switch {
				case err != nil:
					if firstErr == nil {
						firstErr = fmt.Errorf("ModelInfer: %w", err)
					}
				case began.After(settled):
					total++
					if p.Addr != nil && p.Addr.String() == slow {
						toSlow++
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if total == 0 {
		t.Fatal("no calls after the first second")
	}
	return float64(toSlow) / float64(total), total
}
