package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// startLogged runs the server as main does, with the logger newLogger
// builds from the flags (start discards the log).
func startLogged(t *testing.T, args ...string) *running {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1"}, args...), io.Discard)
	must(t, err)
	log, closeLog, err := newLogger(cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		r.done <- run(ctx, cfg, log, func(addrs map[string]string) {
			r.http, r.addrs = "http://"+addrs["HTTP"], addrs
			close(ready)
		})
	}()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() { _ = r.stop(t); closeLog() })
	return r
}

// grpcClient is a client of r's gRPC listener.
func grpcClient(t *testing.T, r *running) pb.GRPCInferenceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(r.addrs["GRPC"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

// The --log-* options start the settings that HTTP /v2/logging and gRPC
// LogSettings report and change, and the binary's log follows them: a
// verbose level set over HTTP is seen over gRPC, logs each inference
// request of either protocol, and the format changes from the next line.
func TestRuntimeLogSettings(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "inferd.log")
	r := startLogged(t, "--model-repository=../../examples/model_repository", "--log-file="+logFile, "--log-format=json", "--log-warning=false")
	client := grpcClient(t, r)
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	status, body := get(t, r.http+"/v2/logging")
	want := `{"log_file":"` + logFile + `","log_info":true,"log_warning":false,"log_error":true,"log_verbose_level":0,"log_format":"json"}`
	if status != 200 || body != want {
		t.Fatalf("GET /v2/logging: %d %s, want %s", status, body, want)
	}
	if status, body := post(t, r.http+"/v2/logging", `{"log_verbose_level":2}`); status != 200 || !strings.Contains(body, `"log_verbose_level":2`) {
		t.Fatalf("POST: %d %s", status, body)
	}
	gs, err := client.LogSettings(c, &pb.LogSettingsRequest{})
	must(t, err)
	if v := gs.GetSettings()["log_verbose_level"].GetUint32Param(); v != 2 || gs.GetSettings()["log_format"].GetStringParam() != "json" ||
		gs.GetSettings()["log_file"].GetStringParam() != logFile || gs.GetSettings()["log_warning"].GetBoolParam() {
		t.Fatalf("gRPC sees %v", gs.GetSettings())
	}

	if status, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); status != 200 {
		t.Fatalf("infer: %d %s", status, body)
	}
	in := make([]byte, 64)
	_, err = client.ModelInfer(c, &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}, {Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}}},
		RawInputContents: [][]byte{in, in}})
	must(t, err)
	// ISO8601 over gRPC, then one more request: a text line.
	_, err = client.LogSettings(c, &pb.LogSettingsRequest{Settings: map[string]*pb.LogSettingsRequest_SettingValue{
		"log_format": {ParameterChoice: &pb.LogSettingsRequest_SettingValue_StringParam{StringParam: "ISO8601"}}}})
	must(t, err)
	if status, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); status != 200 {
		t.Fatalf("infer: %d %s", status, body)
	}

	b, err := os.ReadFile(logFile)
	must(t, err)
	var requests []map[string]any
	var text []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			if rec["msg"] == "inference request" {
				requests = append(requests, rec)
			}
			continue
		}
		text = append(text, line)
	}
	if len(requests) != 2 || requests[0]["protocol"] != "HTTP" || requests[0]["path"] != "/v2/models/simple/infer" ||
		requests[1]["protocol"] != "GRPC" || requests[1]["model"] != "simple" || requests[1]["version"] != "1" ||
		requests[1]["inputs"] != "INPUT0 INT32 [1,16], INPUT1 INT32 [1,16]" {
		t.Fatalf("JSON request lines %v\nlog:\n%s", requests, b)
	}
	// Triton's ISO8601 layout: every HTTP request's line, then the
	// inference request's, its attributes after the message.
	iso := []*regexp.Regexp{
		regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ logging\.go:\d+\] "HTTP request: 2 /v2/models/simple/infer"$`),
		regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ infer\.go:\d+\] "inference request" protocol=HTTP path=/v2/models/simple/infer model=simple version=1 inputs="INPUT0 INT32 \[1,16\], INPUT1 INT32 \[1,16\]"$`),
	}
	if len(text) != len(iso) || !iso[0].MatchString(text[0]) || !iso[1].MatchString(text[1]) {
		t.Fatalf("text lines %q", text)
	}
}

// paramsModelRepo is a repository holding servertest's params model.py.
func paramsModelRepo(t *testing.T) string {
	root := t.TempDir()
	servertest.WriteParamsModel(t, root, "params")
	return root
}

// --http-header-forward-pattern and --grpc-header-forward-pattern bring
// matching headers to a model.py's request.parameters(), except the ones
// restricted APIs require.
func TestHeaderForwardingToPython(t *testing.T) {
	r := start(t, "--model-repository="+paramsModelRepo(t), "--grpc-address=127.0.0.1",
		"--backend-config=python,python-executable="+servertest.Python(t),
		"--http-header-forward-pattern=my-.*", "--grpc-header-forward-pattern=MY-.*",
		"--http-restricted-api=inference:my-auth=s", "--grpc-restricted-protocol=inference:my-auth=s")

	req, err := http.NewRequest(http.MethodPost, r.http+"/v2/models/params/infer",
		strings.NewReader(`{"inputs":[{"name":"IN","shape":[1],"datatype":"FP32","data":[1]}]}`))
	must(t, err)
	req.Header.Set("My-Auth", "s")
	req.Header.Set("My-Key", "http value")
	req.Header.Set("Other", "o")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var out struct {
		Outputs []struct {
			Data []string `json:"data"`
		} `json:"outputs"`
	}
	must(t, json.Unmarshal(body, &out))
	if resp.StatusCode != 200 || len(out.Outputs) != 1 || out.Outputs[0].Data[0] != `{"my-key":"http value"}` {
		t.Fatalf("HTTP: %d %s", resp.StatusCode, body)
	}

	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c = metadata.AppendToOutgoingContext(c, "triton-grpc-protocol-my-auth", "s", "my-key", "grpc value", "other", "o")
	g, err := grpcClient(t, r).ModelInfer(c, &pb.ModelInferRequest{ModelName: "params",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "IN", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))}})
	must(t, err)
	if raw := g.GetRawOutputContents(); len(raw) != 1 || string(raw[0][4:]) != `{"my-key":"grpc value"}` {
		t.Fatalf("gRPC: %q", raw)
	}
}

// The forward patterns are in effect (no longer in the start-up warning's
// planned list), and a pattern RE2 cannot compile stops the start.
func TestForwardPatternFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--model-repository=x", "--http-header-forward-pattern=a", "--grpc-header-forward-pattern=b"}, io.Discard)
	must(t, err)
	if cfg.httpForward == nil || cfg.grpcForward == nil || slices.ContainsFunc(cfg.planned, func(s string) bool { return strings.Contains(s, "forward") }) {
		t.Fatalf("forwarders %v %v, planned %v", cfg.httpForward, cfg.grpcForward, cfg.planned)
	}
	for _, flag := range []string{"--http-header-forward-pattern", "--grpc-header-forward-pattern"} {
		_, err := parseFlags([]string{"--model-repository=x", flag + "=my-("}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "missing closing )") {
			t.Errorf("%s=my-(: %v", flag, err)
		}
	}
}
