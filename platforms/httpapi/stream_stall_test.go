package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
)

// floodServer serves testdata/flood (a decoupled model.py, one instance,
// that sends N responses of SIZE integers as fast as it can) with the
// Python backend.
func floodServer(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.CopyFS(filepath.Join(root, "flood"), os.DirFS("testdata/flood")))
	pb := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = pb.Close() })
	base, _ := startServer(t, root, serverOpts{backends: []core.Backend{pb}})
	return base
}

// failedRequests reads the model's failed-request count from its
// statistics.
func failedRequests(t *testing.T, base, model string) int {
	t.Helper()
	status, _, body := do(t, "GET", base+"/v2/models/"+model+"/stats", nil, nil)
	var stats struct {
		ModelStats []struct {
			InferenceStats struct {
				Fail struct {
					Count int `json:"count"`
				} `json:"fail"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if status != 200 || json.Unmarshal(body, &stats) != nil || len(stats.ModelStats) != 1 {
		t.Fatalf("stats: %d %s", status, body)
	}
	return stats.ModelStats[0].InferenceStats.Fail.Count
}

// TestStalledGenerateStream: a client that opens /generate_stream on a
// decoupled model.py sending large responses fast, and never reads them,
// cannot hold the model's worker back: requests to the same instance
// complete while the stream's buffers are full, and the stalled stream
// ends (its request fails, so the model stops producing) within a bound.
func TestStalledGenerateStream(t *testing.T) {
	base := floodServer(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	must(t, err)
	defer conn.Close()
	// About 80 KB per event, far more than the sockets' buffers hold.
	body := `{"N":1000000,"SIZE":16384}`
	_, err = fmt.Fprintf(conn, "POST /v2/models/flood/generate_stream HTTP/1.1\r\nHost: inferd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	must(t, err)

	// The stream fills the sockets within moments; requests sent over a
	// few seconds meet it stalled.
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 10 {
		resp, err := client.Post(base+"/v2/models/flood/generate", "application/json", strings.NewReader(`{"N":1,"SIZE":4}`))
		if err != nil {
			t.Fatalf("request %d while a stream stalls: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"OUT":[0,1,2,3]`) {
			t.Fatalf("request %d while a stream stalls: %d %s", i, resp.StatusCode, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for deadline := time.Now().Add(60 * time.Second); failedRequests(t, base, "flood") == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream's request never ended")
		}
	}
}

// TestStalledGenerateStreamONNX: an ONNX model's response to a
// /generate_stream client that never reads is handed over without waiting
// for the client: the model's one instance serves the next requests at
// once instead of writing megabytes into a full socket.
func TestStalledGenerateStreamONNX(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	must(t, err)
	defer conn.Close()
	// About 9 MB of response, more than the sockets' buffers hold.
	const n = 1 << 20
	body := `{"INPUT0":[0.123456` + strings.Repeat(",0.123456", n-1) + `]}`
	_, err = fmt.Fprintf(conn, "POST /v2/models/id1/generate_stream HTTP/1.1\r\nHost: inferd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	must(t, err)
	time.Sleep(time.Second) // the model runs and the socket fills
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 3 {
		resp, err := client.Post(base+"/v2/models/id1/infer", "application/json",
			strings.NewReader(`{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`))
		if err != nil {
			t.Fatalf("request %d while a stream stalls: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"data":[1.0,2.0]`) {
			t.Fatalf("request %d while a stream stalls: %d %s", i, resp.StatusCode, b)
		}
	}
}
