package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// shmServer is inferd with client shared memory allowed
// (--allow-client-shm) on both APIs, counting the infer requests that
// named a region for every input and output and carried no tensor data.
type shmServer struct {
	httpAddr, grpcAddr string
	regions            *shm.Manager
	httpShm, grpcShm   atomic.Int64
	httpInfer          atomic.Int64
}

func startShmServer(t *testing.T) *shmServer {
	t.Helper()
	s := &shmServer{regions: shm.NewManager(nil)}
	core := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, testModels(t))})
	api := httpapi.New(core, httpapi.Options{SharedMemory: s.regions})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/infer") {
			s.httpInfer.Add(1)
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if shmOnly(t, body) {
				s.httpShm.Add(1)
			}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.httpAddr = strings.TrimPrefix(hs.URL, "http://")

	gapi := grpcapi.New(core, grpcapi.Options{SharedMemory: s.regions})
	gs := grpc.NewServer(append(gapi.ServerOptions(), grpc.ChainUnaryInterceptor(
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if r, ok := req.(*pb.ModelInferRequest); ok && len(r.GetRawInputContents()) == 0 && len(r.GetOutputs()) > 0 {
				all := true
				for _, in := range r.GetInputs() {
					all = all && in.GetParameters()["shared_memory_region"].GetStringParam() != ""
				}
				for _, out := range r.GetOutputs() {
					all = all && out.GetParameters()["shared_memory_region"].GetStringParam() != ""
				}
				if all {
					s.grpcShm.Add(1)
				}
			}
			return handler(ctx, req)
		}))...)
	gapi.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	s.grpcAddr = ln.Addr().String()
	return s
}

// shmOnly tells whether an HTTP infer body is JSON whose every input and
// output names a shared-memory region, with no data.
func shmOnly(t *testing.T, body []byte) bool {
	var req struct {
		Inputs []struct {
			Data       json.RawMessage `json:"data"`
			Parameters map[string]any  `json:"parameters"`
		} `json:"inputs"`
		Outputs []struct {
			Parameters map[string]any `json:"parameters"`
		} `json:"outputs"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Inputs) == 0 || len(req.Outputs) == 0 {
		return false
	}
	for _, in := range req.Inputs {
		if in.Data != nil || in.Parameters["shared_memory_region"] == nil || in.Parameters["binary_data_size"] != nil {
			return false
		}
	}
	for _, out := range req.Outputs {
		if out.Parameters["shared_memory_region"] == nil {
			return false
		}
	}
	return true
}

// perfObjects lists the shared-memory objects this process's inferd perf
// runs left in /dev/shm.
func perfObjects(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(shmDir, "inferd_perf_"+strconv.Itoa(os.Getpid())+"_*"))
	must(t, err)
	return m
}

func TestSharedMemory(t *testing.T) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skipf("no %s: %v", shmDir, err)
	}
	s := startShmServer(t)
	data := filepath.Join(t.TempDir(), "data.json")
	must(t, os.WriteFile(data, []byte(`{"data":[
		{"INPUT0":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"INPUT1":{"content":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"shape":[16]}},
		{"INPUT0":{"b64":"`+b64Int32(16, 3)+`"},"INPUT1":{"b64":"`+b64Int32(16, 2)+`"}}]}`), 0o644))
	// One at a time: the counts are the server's, and each run's regions
	// must be gone before the next.
	for _, tc := range []struct {
		name  string
		args  []string
		count func() int64
	}{
		{"http", []string{"-u", s.httpAddr, "-m", "simple", "-b", "2"}, s.httpShm.Load},
		{"http data file", []string{"-u", s.httpAddr, "-m", "simple", "--input-data", data}, s.httpShm.Load},
		{"http variable output", []string{"-u", s.httpAddr, "-m", "id_nobatch", "--shape", "INPUT0:5", "--output-shared-memory-size", "64"}, s.httpShm.Load},
		{"grpc", []string{"-i", "grpc", "-u", s.grpcAddr, "-m", "simple", "--concurrency-range", "1:2"}, s.grpcShm.Load},
		{"grpc bytes", []string{"-i", "grpc", "-u", s.grpcAddr, "-m", "id_bytes", "--string-length", "5"}, s.grpcShm.Load},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.count()
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runPerf(t, append(append([]string{"--shared-memory", "system", "--json", jsonPath}, fast...), tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			rep, _ := readReport(t, jsonPath)
			var sent int64
			for _, r := range rep.Results {
				if r.Errors != 0 || r.Throughput <= 0 {
					t.Errorf("result %+v", r)
				}
				sent += int64(r.Requests)
			}
			// Every request the windows counted, and the one before them,
			// went through the regions.
			if got := tc.count() - before; got < sent+1 {
				t.Errorf("%d requests through shared memory, the tool counted %d", got, sent)
			}
			if st, err := s.regions.Status(shm.System, ""); err != nil || len(st) != 0 {
				t.Errorf("regions left registered: %v %v", st, err)
			}
			if left := perfObjects(t); len(left) != 0 {
				t.Errorf("objects left in %s: %v", shmDir, left)
			}
		})
	}

	t.Run("server without client shared memory", func(t *testing.T) {
		// startInferd's servers have the extension off: registering fails,
		// and the tool says so and leaves nothing behind.
		addr, _, _ := startInferd(t)
		code, stdout, stderr := runPerf(t, append([]string{"--shared-memory", "system", "-u", addr, "-m", "simple"}, fast...)...)
		if code != 1 || !strings.Contains(stderr, "--shared-memory system: registering region inferd_perf_") || stdout != "" {
			t.Errorf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
		}
		if left := perfObjects(t); len(left) != 0 {
			t.Errorf("objects left in %s: %v", shmDir, left)
		}
	})
}

func TestCountWindows(t *testing.T) {
	t.Parallel()
	addr, _, _ := startInferd(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runPerf(t, "-u", addr, "-m", "simple", "--json", jsonPath, "-s", "100000", "--max-trials", "3",
		"--measurement-mode", "count_windows", "--measurement-request-count", "20", "-p", "1", "-v")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, line := range []string{`  Using "count_windows" mode for stabilization`, "  Minimum number of samples in each window: 20",
		"Request concurrency: 1", "    Throughput: ", "    p50 latency: ", "    Avg request latency: ", "Concurrency: 1, throughput: ",
		// -v: perf_analyzer's line for each window.
		"  Pass [1] throughput: ", "  Pass [3] throughput: "} {
		if !strings.Contains(stdout, line) {
			t.Errorf("no %q in stdout:\n%s", line, stdout)
		}
	}
	rep, b := readReport(t, jsonPath)
	// Three windows of at least a second (not -p's millisecond) and 20
	// requests each.
	if len(rep.Results) != 1 {
		t.Fatalf("%s", b)
	}
	r := rep.Results[0]
	if r.Windows != 3 || r.Requests < 60 || r.Throughput <= 0 || float64(r.Requests) < r.Throughput*2.9 {
		t.Errorf("result %+v", r)
	}
}
