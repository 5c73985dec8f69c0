package lambda

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// runtimeChildEnv makes TestRuntimeLoopChild run Start; Start never
// returns, so it runs in a subprocess of the test binary.
const runtimeChildEnv = "INFERD_LAMBDA_RUNTIME_CHILD"

func TestRuntimeLoopChild(t *testing.T) {
	if os.Getenv(runtimeChildEnv) != "1" {
		t.Skip("subprocess of TestRuntimeLoop")
	}
	Start(echoHandler(), Options{})
}

// invocationResult is one POST the function made to the fake Runtime API.
type invocationResult struct {
	id, kind, contentType string
	body                  []byte
}

// fakeRuntimeAPI serves the Runtime API routes aws-lambda-go uses: it
// hands out events in order, then holds further /next calls open until
// the test ends, and reports every response or error posted back.
func fakeRuntimeAPI(t *testing.T, payloads [][]byte) (addr string, results <-chan invocationResult) {
	t.Helper()
	out := make(chan invocationResult, len(payloads)+4)
	done := make(chan struct{})
	var mu sync.Mutex
	next := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(payloads) {
			select {
			case <-done:
			case <-r.Context().Done():
			}
			http.Error(w, "shutting down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-"+strconv.Itoa(i))
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:inferd")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payloads[i])
	})
	report := func(kind string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			out <- invocationResult{id: r.PathValue("id"), kind: kind, contentType: r.Header.Get("Content-Type"), body: b}
			w.WriteHeader(http.StatusAccepted)
		}
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", report("response"))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", report("error"))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", report("init-error"))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs before srv.Close: releases held /next calls
	return strings.TrimPrefix(srv.URL, "http://"), out
}

// TestRuntimeLoop runs the real aws-lambda-go runtime loop against a local
// Runtime API and checks the HTTP response events it posts back.
func TestRuntimeLoop(t *testing.T) {
	if os.Getenv(runtimeChildEnv) == "1" {
		t.Skip("parent only")
	}
	urlEv := urlEvent("POST", "/echo", "x=1", `{"k":"v"}`, false)
	albEv := albEvent("GET", "/bin", true, "", false)
	addr, results := fakeRuntimeAPI(t, [][]byte{mustJSON(t, urlEv), mustJSON(t, albEv), []byte(`{"not":"an http event"}`)})

	var output bytes.Buffer // read only after Wait: exec copies into it meanwhile
	cmd := exec.Command(os.Args[0], "-test.run=^TestRuntimeLoopChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), runtimeChildEnv+"=1", "AWS_LAMBDA_RUNTIME_API="+addr)
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs first: the child is gone before the fake API closes
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	got := make([]invocationResult, 0, 3)
	timeout := time.After(60 * time.Second)
	for len(got) < 3 {
		select {
		case r := <-results:
			got = append(got, r)
		case <-timeout:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("got %d of 3 results; child output:\n%s", len(got), output.String())
		}
	}
	for i, r := range got {
		if r.kind != "response" || r.id != "req-"+strconv.Itoa(i) || r.contentType != "application/json" {
			t.Fatalf("invocation %d: %s for %s, content type %q: %s", i, r.kind, r.id, r.contentType, r.body)
		}
	}

	var u events.LambdaFunctionURLResponse
	if err := json.Unmarshal(got[0].body, &u); err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(u.Body), &e); err != nil || u.StatusCode != 200 || u.IsBase64Encoded ||
		e.Method != "POST" || e.Path != "/echo" || e.Query != "x=1" || string(e.Body) != `{"k":"v"}` {
		t.Fatalf("function URL response %s", got[0].body)
	}

	var alb events.ALBTargetGroupResponse
	if err := json.Unmarshal(got[1].body, &alb); err != nil {
		t.Fatal(err)
	}
	if alb.StatusCode != 200 || alb.StatusDescription != "200 OK" || !alb.IsBase64Encoded || alb.Headers != nil ||
		alb.MultiValueHeaders["Content-Type"][0] != "application/octet-stream" {
		t.Fatalf("ALB response %s", got[1].body)
	}

	// An unrecognised event is still answered with a response object.
	var bad events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(got[2].body, &bad); err != nil || bad.StatusCode != 400 || !strings.Contains(bad.Body, "unrecognised Lambda event") {
		t.Fatalf("bad event response %s", got[2].body)
	}
}
