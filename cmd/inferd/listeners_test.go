package main

import (
	"io"
	"strings"
	"testing"

	"github.com/inferd/inferd/sagemaker"
)

func TestListenerRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // services, in order
		err  string
	}{
		{name: "local", args: nil, want: []string{"HTTP", "GRPC", "metrics"}},
		{name: "sagemaker beside http", args: []string{"--allow-sagemaker=true"}, want: []string{"HTTP", "GRPC", "SageMaker", "metrics"}},
		// Triton's text (triton-inference-server/server qa/L0_sagemaker/test.sh).
		{name: "safe range refuses http", args: []string{"--allow-sagemaker=true", "--sagemaker-safe-port-range=8081-9000"},
			err: "The server cannot listen to HTTP requests at port 8000, allowed port range is [8081, 9000]"},
		{name: "safe range allows the rest", args: []string{"--allow-sagemaker=true", "--sagemaker-safe-port-range=8000-9000"}, want: []string{"HTTP", "GRPC", "SageMaker", "metrics"}},
		{name: "same port", args: []string{"--allow-sagemaker=true", "--http-port=8080"},
			err: "The server cannot listen to HTTP requests and SageMaker requests at the same address and port 0.0.0.0:8080"},
		{name: "vertex and sagemaker clash", args: []string{"--allow-sagemaker=true", "--allow-vertex-ai=true", "--allow-http=false"},
			err: "The server cannot listen to SageMaker requests and Vertex AI requests at the same address and port 0.0.0.0:8080"},
		{name: "grpc off", args: []string{"--allow-grpc=false"}, want: []string{"HTTP", "metrics"}},
		{name: "grpc on the http port", args: []string{"--allow-grpc=true", "--grpc-port=8000"},
			err: "The server cannot listen to HTTP requests and GRPC requests at the same address and port 0.0.0.0:8000"},
		{name: "safe range refuses grpc", args: []string{"--allow-sagemaker=true", "--allow-grpc=true", "--sagemaker-safe-port-range=8000-8000", "--allow-metrics=false"},
			err: "The server cannot listen to GRPC requests at port 8001, allowed port range is [8000, 8000]"},
		{name: "bad range", args: []string{"--allow-sagemaker=true", "--sagemaker-safe-port-range=9000"}, err: `"9000" is not <first>-<second>`},
		{name: "reversed range", args: []string{"--allow-sagemaker=true", "--sagemaker-safe-port-range=9000-8000"}, err: "expects <lo>-<hi>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseFlags(append([]string{"--model-repository=x"}, tc.args...), io.Discard)
			var got []listenSpec
			if err == nil {
				got, err = listeners(cfg)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range got {
				names = append(names, l.service)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("listeners %v, want %v", names, tc.want)
			}
		})
	}
}

func TestVertexEnvironmentDefaults(t *testing.T) {
	t.Setenv("AIP_MODE", "PREDICTION")
	t.Setenv("AIP_HTTP_PORT", "7080")
	t.Setenv("AIP_STORAGE_URI", "gs://bucket/models")
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.allowVertex || cfg.allowHTTP || cfg.vertexPort != 7080 || len(cfg.repos) != 1 || cfg.repos[0] != "gs://bucket/models" {
		t.Fatalf("vertex defaults: allowVertex=%v allowHTTP=%v port=%d repos=%v", cfg.allowVertex, cfg.allowHTTP, cfg.vertexPort, cfg.repos)
	}
	cfg, err = parseFlags([]string{"--allow-http=true", "--model-repository=/m"}, io.Discard)
	if err != nil || !cfg.allowHTTP || cfg.repos[0] != "/m" {
		t.Fatalf("explicit flags win: %v %+v", err, cfg)
	}
}

// TestServeListeners: under serve only the SageMaker listener opens unless
// SAGEMAKER_TRITON_ALLOW_METRICS enables metrics (triton-inference-server/
// server docker/sagemaker/serve); without AIP_MODE the Vertex listener is
// off (src/command_line_parser.cc).
func TestServeListeners(t *testing.T) {
	dir := t.TempDir()
	writeModel(t, dir, "simple", taggedSimple, nil)
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "SageMaker"},
		{map[string]string{"SAGEMAKER_TRITON_ALLOW_METRICS": "true"}, "SageMaker,metrics"},
	} {
		args, _, err := sagemaker.ServeArgs(func(k string) string { return tc.env[k] }, sagemaker.ServeConfig{ModelDir: dir, Stderr: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		specs, err := listeners(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range specs {
			names = append(names, s.service)
		}
		if strings.Join(names, ",") != tc.want {
			t.Errorf("env %v: listeners %v, want %s", tc.env, names, tc.want)
		}
	}
	cfg, err := parseFlags([]string{"--model-repository=x"}, io.Discard)
	if err != nil || cfg.allowVertex {
		t.Fatalf("without AIP_MODE the Vertex listener is on: %v", err)
	}
}
