package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/sagemaker"
)

func TestTimeoutFlags(t *testing.T) {
	var out bytes.Buffer
	_, _ = parseFlags([]string{"--help"}, &out)
	for _, name := range []string{"http-read-header-timeout", "http-idle-timeout", "http-body-read-timeout", "http-body-min-rate", "sagemaker-unload-timeout"} {
		if !strings.Contains(out.String(), "-"+name) {
			t.Errorf("--help does not document --%s", name)
		}
	}
	cfg, err := parseFlags([]string{"--model-repository=x"}, io.Discard)
	must(t, err)
	if got := cfg.timeouts(); got != httpapi.DefaultTimeouts() || cfg.sageMakerUnload != sagemaker.DefaultUnloadTimeout {
		t.Errorf("defaults %+v, unload %v", got, cfg.sageMakerUnload)
	}
	cfg, err = parseFlags([]string{"--model-repository=x", "--http-read-header-timeout=1s", "--http-idle-timeout=2m", "--http-body-read-timeout=3s", "--http-body-min-rate=0"}, io.Discard)
	must(t, err)
	if want := (httpapi.Timeouts{ReadHeader: time.Second, Idle: 2 * time.Minute, Body: 3 * time.Second}); cfg.timeouts() != want {
		t.Errorf("timeouts %+v, want %+v", cfg.timeouts(), want)
	}
	for _, bad := range []string{"--http-idle-timeout=-1s", "--http-body-min-rate=-5", "--sagemaker-unload-timeout=-1s"} {
		if _, err := parseFlags([]string{"--model-repository=x", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// closedWithin reports whether the server closes conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestListenerTimeouts: every listener the binary opens (HTTP, metrics,
// SageMaker, Vertex AI) cuts a client that sends its headers slowly and
// closes an idle kept-alive connection, with the flags' values; the HTTP
// and SageMaker listeners cut a stalled body.
func TestListenerTimeouts(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	t.Setenv("AIP_HEALTH_ROUTE", "/health")
	t.Setenv("AIP_PREDICT_ROUTE", "/predict")
	t.Setenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "simple")
	// gRPC has its own keepalive policy (--grpc-keepalive-*), not these.
	r := start(t, "--model-repository="+root, "--allow-grpc=false", "--allow-sagemaker=true", "--sagemaker-port=0", "--allow-vertex-ai=true", "--vertex-ai-port=0",
		"--http-read-header-timeout=300ms", "--http-idle-timeout=300ms", "--http-body-read-timeout=400ms")
	if len(r.addrs) != 4 {
		t.Fatalf("listeners %v", r.addrs)
	}
	for service, addr := range r.addrs {
		addr = strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)
		addr = strings.Replace(addr, "[::]", "127.0.0.1", 1)
		health := map[string]string{"HTTP": "/v2/health/live", "metrics": "/metrics", "SageMaker": "/ping", "Vertex AI": "/health"}[service]
		t.Run(service+" slow headers", func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			must(t, err)
			defer conn.Close()
			start := time.Now()
			go func() {
				_, _ = io.WriteString(conn, "GET "+health+" HTTP/1.1\r\nHost: x\r\n")
				for i := 0; time.Since(start) < 5*time.Second; i++ {
					if _, err := fmt.Fprintf(conn, "X-%d: y\r\n", i); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			if !closedWithin(conn, 3*time.Second) {
				t.Fatal("never cut")
			}
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Fatalf("cut after %v", d)
			}
		})
		t.Run(service+" idle connection", func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			must(t, err)
			defer conn.Close()
			_, _ = io.WriteString(conn, "GET "+health+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", health, resp.StatusCode)
			}
			start := time.Now()
			if !closedWithin(conn, 3*time.Second) {
				t.Fatal("idle connection kept")
			}
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Fatalf("closed after %v", d)
			}
		})
	}
	for service, path := range map[string]string{"HTTP": "/v2/models/simple/infer", "SageMaker": "/invocations", "Vertex AI": "/predict"} {
		t.Run(service+" stalled body", func(t *testing.T) {
			addr := strings.Replace(strings.Replace(r.addrs[service], "0.0.0.0", "127.0.0.1", 1), "[::]", "127.0.0.1", 1)
			conn, err := net.Dial("tcp", addr)
			must(t, err)
			defer conn.Close()
			start := time.Now()
			_, _ = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\":[")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			must(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), "failed to read the request body") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("cut after %v", d)
			}
		})
	}
}
