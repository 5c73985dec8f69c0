package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// chainBody is an ensemble request for servertest.Chain.
const chainBody = `{"inputs":[{"name":"IN0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"IN1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

// TestModelNamespacing: --model-namespacing over the HTTP, gRPC and
// metrics listeners, two repositories that both hold `simple` (version 1
// in a, 3 in b) and an ensemble over it each. Triton's answers: a name in
// two namespaces is ambiguous (400, INVALID_ARG), a name never loaded is
// INVALID_ARG too, one whose models were unloaded is NOT_FOUND; the index
// lists both under their name; metrics carry the namespace label.
func TestModelNamespacing(t *testing.T) {
	simple3 := servertest.Simple("simple")
	simple3.Versions = []string{"3"}
	a := servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple"), "chain_a": servertest.Chain("chain_a")})
	b := servertest.WriteRepo(t, map[string]servertest.Model{"simple": simple3, "chain_b": servertest.Chain("chain_b")})
	r := start(t, "--model-repository="+a, "--model-repository="+b, "--model-namespacing=true", "--grpc-address=127.0.0.1", "--model-control-mode=explicit", "--load-model=*",
		"--metrics-config=summary_latencies=true")
	if r.http == "" {
		t.Fatalf("server did not start: %v", <-r.done)
	}
	ambiguous := "There are 2 identifiers of model 'simple' in global map, model namespace must be provided to resolve ambiguity."
	errorJSON := func(msg string) string { b, _ := json.Marshal(map[string]string{"error": msg}); return string(b) }

	for _, c := range []struct {
		what, method, path, body string
		status                   int
		want                     string // exact body; "" to skip
	}{
		{"infer ambiguous", "POST", "/v2/models/simple/infer", readmeExample, 400, errorJSON(ambiguous)},
		{"metadata ambiguous", "GET", "/v2/models/simple", "", 400, errorJSON(ambiguous)},
		{"config ambiguous", "GET", "/v2/models/simple/config", "", 400, errorJSON(ambiguous)},
		{"ready ambiguous", "GET", "/v2/models/simple/ready", "", 400, errorJSON(ambiguous)},
		{"ready unknown", "GET", "/v2/models/nope/ready", "", 400, errorJSON("Request for unknown model: 'nope' is not found")},
		{"ready a's only", "GET", "/v2/models/chain_a/ready", "", 200, ""},
		{"stats ambiguous", "GET", "/v2/models/simple/stats", "", 400, errorJSON("requested model 'simple' is not available")},
		{"infer unknown", "POST", "/v2/models/nope/infer", readmeExample, 400, errorJSON("Request for unknown model: 'nope' is not found")},
		{"metadata unknown", "GET", "/v2/models/nope", "", 400, errorJSON("Request for unknown model: 'nope' is not found")},
		{"ensemble a", "POST", "/v2/models/chain_a/infer", chainBody, 200, ""},
		{"ensemble b", "POST", "/v2/models/chain_b/infer", chainBody, 200, ""},
	} {
		var s int
		var body string
		if c.method == "GET" {
			s, body = get(t, r.http+c.path)
		} else {
			s, body = post(t, r.http+c.path, c.body)
		}
		if s != c.status || (c.want != "" && body != c.want) {
			t.Errorf("%s: %d %s, want %d %s", c.what, s, body, c.status, c.want)
		}
	}

	// The index: by repository, then name, each simple under its name.
	_, index := post(t, r.http+"/v2/repository/index", "")
	want := `[{"name":"chain_a","version":"1","state":"READY"},{"name":"simple","version":"1","state":"READY"},{"name":"chain_b","version":"1","state":"READY"},{"name":"simple","version":"3","state":"READY"}]`
	if index != want {
		t.Errorf("index %s, want %s", index, want)
	}

	// Every model's statistics list both simples under their name.
	var stats struct {
		ModelStats []struct{ Name, Version string } `json:"model_stats"`
	}
	_, body := get(t, r.http+"/v2/models/stats")
	must(t, json.Unmarshal([]byte(body), &stats))
	var names []string
	for _, m := range stats.ModelStats {
		names = append(names, m.Name+":"+m.Version)
	}
	if got := strings.Join(names, ","); got != "chain_a:1,chain_b:1,simple:1,simple:3" {
		t.Errorf("statistics of every model: %s", got)
	}

	// Metrics: each simple's series carries its namespace; each ensemble
	// ran its own repository's simple twice.
	_, text := get(t, r.metrics+"/metrics")
	for _, c := range []struct{ series, want string }{
		{`nv_inference_request_success{model="simple",namespace="` + a + `",version="1"}`, "2"},
		{`nv_inference_request_success{model="simple",namespace="` + b + `",version="3"}`, "2"},
		{`nv_inference_request_success{model="chain_a",namespace="` + a + `",version="1"}`, "1"},
		// The version's observer families carry it too.
		{`nv_inference_request_summary_us_count{model="simple",namespace="` + b + `",version="3"}`, "2"},
	} {
		if got := metricValue(t, text, c.series); got != c.want {
			t.Errorf("%s = %s, want %s", c.series, got, c.want)
		}
	}

	// gRPC answers the same errors with INVALID_ARGUMENT.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := grpcClient(t, r)
	wantStatus := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if st, _ := status.FromError(err); st.Code() != code || st.Message() != msg {
			t.Errorf("%s: %v, want %v %q", what, err, code, msg)
		}
	}
	_, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}, {Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}}},
		RawInputContents: [][]byte{make([]byte, 64), make([]byte, 64)}})
	wantStatus("gRPC infer ambiguous", err, codes.InvalidArgument, ambiguous)
	_, err = c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "nope"})
	wantStatus("gRPC metadata unknown", err, codes.InvalidArgument, "Request for unknown model: 'nope' is not found")
	_, err = c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "simple"})
	wantStatus("gRPC ready ambiguous", err, codes.InvalidArgument, ambiguous)
	if ready, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "chain_b"}); err != nil || !ready.GetReady() {
		t.Errorf("gRPC ready chain_b: %v %v", ready, err)
	}

	// Unloading the name unloads both, and the ensembles over them; a
	// request then finds no identifier left. Loading brings all back.
	if s, body := post(t, r.http+"/v2/repository/models/simple/unload", ""); s != 200 {
		t.Fatalf("unload: %d %s", s, body)
	}
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 404 || body != errorJSON("Identifier of model 'simple' is not found in global map") {
		t.Errorf("infer after unload: %d %s", s, body)
	}
	if s, body := get(t, r.http+"/v2/models/simple/ready"); s != 404 || body != errorJSON("Identifier of model 'simple' is not found in global map") {
		t.Errorf("ready after unload: %d %s", s, body)
	}
	_, err = c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "simple"})
	wantStatus("gRPC metadata after unload", err, codes.NotFound, "Identifier of model 'simple' is not found in global map")
	if _, index := post(t, r.http+"/v2/repository/index", `{"ready":true}`); index != "[]" {
		t.Errorf("ready index after unload: %s", index)
	}
	if s, body := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("load: %d %s", s, body)
	}
	if s, body := post(t, r.http+"/v2/models/chain_b/infer", chainBody); s != 200 {
		t.Errorf("ensemble after reload: %d %s", s, body)
	}
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 400 || !strings.Contains(body, "There are 2 identifiers") {
		t.Errorf("infer after reload: %d %s", s, body)
	}
}

// TestModelNamespacingLoadErrors: the repository API's load of a name
// whose models fail in both repositories answers 400 with one Triton line
// per repository's model; an ensemble whose step no repository resolves
// (its own lacks the model, two others hold it) fails with Triton's
// message; gRPC's RepositoryModelLoad answers the same with
// INVALID_ARGUMENT.
func TestModelNamespacingLoadErrors(t *testing.T) {
	bad := servertest.Model{Config: `name: "bad"
backend: "nonexistent"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
`}
	a := servertest.WriteRepo(t, map[string]servertest.Model{"bad": bad, "simple": servertest.Simple("simple")})
	b := servertest.WriteRepo(t, map[string]servertest.Model{"bad": bad, "simple": servertest.Simple("simple")})
	c := servertest.WriteRepo(t, map[string]servertest.Model{"chain": servertest.Chain("chain")})
	r := start(t, "--model-repository="+a, "--model-repository="+b, "--model-repository="+c, "--model-namespacing=true",
		"--grpc-address=127.0.0.1", "--model-control-mode=explicit")
	if r.http == "" {
		t.Fatalf("server did not start: %v", <-r.done)
	}
	s, body := post(t, r.http+"/v2/repository/models/bad/load", "")
	var reply struct{ Error string }
	_ = json.Unmarshal([]byte(body), &reply)
	lines := strings.Split(strings.TrimSuffix(reply.Error, "\n"), "\n")
	if s != 400 || len(lines) != 2 || !strings.HasPrefix(lines[0], "load failed for model '"+a+"::bad': ") ||
		!strings.HasPrefix(lines[1], "load failed for model '"+b+"::bad': ") || !strings.Contains(lines[1], "unable to find backend 'nonexistent'") {
		t.Errorf("load bad: %d %s", s, body)
	}
	wantChain := "ensemble " + c + "::chain contains models that are not available or ambiguous: simple"
	if s, body := post(t, r.http+"/v2/repository/models/chain/load", ""); s != 400 || !strings.Contains(body, wantChain) {
		t.Errorf("load chain: %d %s, want 400 with %q", s, body, wantChain)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := grpcClient(t, r).RepositoryModelLoad(ctx, &pb.RepositoryModelLoadRequest{ModelName: "chain"})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), wantChain) {
		t.Errorf("gRPC load chain: %v", err)
	}
}
