package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeRuntimeAPI is the part of the Lambda Runtime API the aws-lambda-go
// loop uses: it hands out the given events one by one and collects the
// responses.
type fakeRuntimeAPI struct {
	mu        sync.Mutex
	events    []string
	firstPoll time.Time
	responses chan string
}

func (f *fakeRuntimeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/invocation/next"):
		f.mu.Lock()
		if f.firstPoll.IsZero() {
			f.firstPoll = time.Now()
		}
		if len(f.events) == 0 {
			f.mu.Unlock()
			<-r.Context().Done() // no more work: the loop waits, as on Lambda
			return
		}
		ev := f.events[0]
		f.events = f.events[1:]
		f.mu.Unlock()
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", "9999999999999")
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:inferd")
		_, _ = io.WriteString(w, ev)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/response"):
		b, _ := io.ReadAll(r.Body)
		f.responses <- string(b)
		w.WriteHeader(http.StatusAccepted)
	default:
		b, _ := io.ReadAll(r.Body)
		f.responses <- "unexpected " + r.Method + " " + r.URL.Path + ": " + string(b)
		w.WriteHeader(http.StatusAccepted)
	}
}

// TestLambdaMode runs the real main with AWS_LAMBDA_RUNTIME_API set: no
// listener opens, and a Function URL event carrying the README's infer
// request is answered by the v2 router. The init time (start to the first
// poll of the Runtime API) is logged.
// functionURLEvent is a Lambda Function URL event posting body to
// simple's infer route.
func functionURLEvent(t *testing.T, body string) string {
	t.Helper()
	event, err := json.Marshal(map[string]any{
		"version": "2.0", "rawPath": "/v2/models/simple/infer", "rawQueryString": "",
		"headers": map[string]string{"content-type": "application/json"},
		"requestContext": map[string]any{
			"domainName": "abc.lambda-url.us-east-1.on.aws",
			"http":       map[string]string{"method": "POST", "path": "/v2/models/simple/infer"},
		},
		"body": body, "isBase64Encoded": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(event)
}

func TestLambdaMode(t *testing.T) {
	api := &fakeRuntimeAPI{events: []string{functionURLEvent(t, readmeExample)}, responses: make(chan string, 4)}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"),
		"INFERD_TEST_ARGS=--model-repository=../../examples/model_repository --log-info=false")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	select {
	case resp := <-api.responses:
		var got struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal([]byte(resp), &got); err != nil {
			t.Fatalf("response %q: %v", resp, err)
		}
		if got.StatusCode != 200 || !strings.Contains(got.Body, `"model_name":"simple"`) || !strings.Contains(got.Body, `"data":[2,3,4`) {
			t.Fatalf("Lambda answered %d %s", got.StatusCode, got.Body)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no response reached the Runtime API")
	}
	api.mu.Lock()
	t.Logf("Lambda init (process start to first Runtime API poll, example repository): %v", api.firstPoll.Sub(start).Round(time.Millisecond))
	api.mu.Unlock()
	// The runtime loop is one of the run group's actors: SIGTERM (sent
	// to the runtime when the environment shuts down) stops the group
	// while the loop waits for the next event, and the exit is clean.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Lambda runtime did not exit after SIGTERM")
	}
}
