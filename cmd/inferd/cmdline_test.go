package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/internal/onnxbuild"
)

// launched is a run of the real binary (this test binary acting as main).
type launched struct {
	base string // http://host:port of the HTTP API
	log  string // what it logged before serving
}

// launch runs argv0 (this test binary, or a link to it) with args, waits
// until it serves, checks /v2/health/ready, then stops it with SIGTERM.
// check runs while it serves.
func launch(t *testing.T, argv0 string, args []string, check func(t *testing.T, l launched)) launched {
	t.Helper()
	var logFile string
	for _, a := range args {
		if f, ok := strings.CutPrefix(a, "--log-file="); ok {
			logFile = f
		}
	}
	argv, _ := json.Marshal(args)
	cmd := exec.Command(argv0, "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGV="+string(argv))
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	serving := regexp.MustCompile(`] "serving" http=(\S+)`)
	var l launched
	var log strings.Builder
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for l.base == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%v: exited before serving:\n%s", args, log.String())
			}
			log.WriteString(line + "\n")
			if m := serving.FindStringSubmatch(line); m != nil {
				l.base = "http://" + m[1]
			}
		case <-tick.C:
			// With --log-file the log goes there.
			if logFile != "" {
				b, _ := os.ReadFile(logFile)
				if m := serving.FindStringSubmatch(string(b)); m != nil {
					l.base = "http://" + m[1]
					log.Write(b)
				}
			}
		case <-deadline:
			t.Fatalf("%v: did not start:\n%s", args, log.String())
		}
	}
	l.log = log.String()
	if status, body := get(t, l.base+"/v2/health/ready"); status != 200 {
		t.Fatalf("%v: ready answered %d %s\n%s", args, status, body, l.log)
	}
	if check != nil {
		check(t, l)
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	go func() {
		for range lines {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v: exit %v", args, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%v: no exit after SIGTERM", args)
	}
	return l
}

// warned is the start-up warning's text, "" when there is none.
func warned(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "options accepted but not in effect") {
			return line
		}
	}
	return ""
}

// valueFor is a value every option accepts that still lets the server
// start on the example repository, on free loopback ports.
func valueFor(t *testing.T, o *options.Option, dir string) string {
	special := map[string]string{
		"model-repository": "../../examples/model_repository", "model-store": "../../examples/model_repository",
		"id": "every-option", "log-file": filepath.Join(dir, "inferd.log"), "log-info": "true",
		"model-config-name": "none", "load-model": "simple", "model-control-mode": "explicit",
		"http-address": "127.0.0.1", "http-port": "0", "metrics-port": "0", "metrics-address": "127.0.0.1",
		"grpc-port": "0", "grpc-address": "127.0.0.1", "http-header-forward-pattern": "x-.*", "grpc-header-forward-pattern": "x-.*",
		"http-restricted-api": "model-repository:admin=1", "grpc-restricted-protocol": "model-repository:admin=1",
		"grpc-server-cert": "/dev/null", "grpc-server-key": "/dev/null", "grpc-root-cert": "/dev/null",
		"allow-sagemaker": "false", "allow-vertex-ai": "false", "sagemaker-safe-port-range": "0-65535",
		"vertex-ai-default-model": "simple", "metrics-config": "summary_latencies=true",
		"trace-config": "rate=100", "backend-config": "default-max-batch-size=4", "cache-config": "local,size=1048576",
		"rate-limit-resource": "R1:4", "cuda-memory-pool-byte-size": "0:4096000000", "cuda-virtual-address-size": "0:1073741824",
		"min-supported-compute-capability": "7.5", "host-policy": "gpu_0,numa-node=0", "model-load-gpu-limit": "0:0.5",
		"response-cache-byte-size": "1048576", "trace-file": filepath.Join(dir, "trace.json"), "trace-level": "off",
		"trace-rate": "1000", "trace-count": "-1", "trace-log-frequency": "0", "repository-cache-dir": filepath.Join(dir, "cache"),
		"openai-api-key": "every-option-key", "openai-api-key-file": filepath.Join(dir, "openai-keys"),
		"model-slo": "simple,p99_ms=50",
	}
	if o.Name == "openai-api-key-file" {
		must(t, os.WriteFile(special[o.Name], []byte("every-option-file-key\n"), 0o600))
	}
	if v, ok := special[o.Name]; ok {
		return v
	}
	if o.Default == "" {
		t.Fatalf("--%s: no value to launch with; add one to valueFor", o.Name)
	}
	return o.Default
}

func TestLaunchLines(t *testing.T) {
	dir := t.TempDir()
	// A model without config.pbtxt: auto-complete shows the global
	// --backend-config default-max-batch-size.
	plain := filepath.Join(dir, "repo", "plain", "1")
	must(t, os.MkdirAll(plain, 0o755))
	must(t, os.WriteFile(filepath.Join(plain, "model.onnx"), onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, 4)), 0o644))
	local := []string{"--http-address", "127.0.0.1", "--http-port", "0", "--metrics-port=0", "--grpc-port", "0"}
	repo := "../../examples/model_repository"

	// Every option at once (planned and no-op ones included).
	var every []string
	var noops []string
	for _, o := range options.All() {
		switch {
		case o.Name == "help" || o.Name == "version":
			continue
		case o.Name == "response-cache-byte-size":
			continue // with --cache-config it is Triton's "Incompatible flags" error
		case o.Kind == options.None:
			every = append(every, "--"+o.Name)
		default:
			every = append(every, "--"+o.Name+"="+valueFor(t, o, dir))
		}
		if o.Status == options.NoOp {
			noops = append(noops, "--"+o.Name)
		}
	}
	self := os.Args[0]
	link := filepath.Join(dir, "tritonserver")
	must(t, os.Symlink(self, link))

	tests := []struct {
		name  string
		argv0 string
		args  []string
		check func(t *testing.T, l launched)
	}{
		{"every option", self, every, func(t *testing.T, l launched) {
			w := warned(l.log)
			for _, n := range noops {
				if !strings.Contains(w, n+",") && !strings.HasSuffix(strings.TrimSuffix(w, `"`), n) {
					t.Errorf("no-op %s missing from the warning: %s", n, w)
				}
			}
			for _, n := range []string{"--grpc-max-response-pool-size (decoupled responses)"} {
				if !strings.Contains(w, n) {
					t.Errorf("planned %s missing from the warning: %s", n, w)
				}
			}
			if _, body := get(t, l.base+"/v2"); !strings.Contains(body, `"name":"every-option"`) {
				t.Errorf("--id: metadata %s", body)
			}
			if !strings.Contains(l.log, "loaded model") {
				t.Errorf("--log-file holds no load line: %q", l.log)
			}
		}},
		{"the issue's launch line", self, append([]string{"--model-repository", repo, "--pinned-memory-pool-byte-size=2048000000",
			"--cuda-memory-pool-byte-size=0:4096000000"}, local...), func(t *testing.T, l launched) {
			if w := warned(l.log); !strings.Contains(w, "--pinned-memory-pool-byte-size") || !strings.Contains(w, "--cuda-memory-pool-byte-size") {
				t.Errorf("warning: %q", w)
			}
		}},
		{"booleans as words", self, append([]string{"--model-repository", repo, "--log-info", "True", "--allow-http", "True",
			"--grpc-infer-allocation-pool-size=16", "--http-thread-count=8", "--id=my-triton"}, local...), func(t *testing.T, l launched) {
			if _, body := get(t, l.base+"/v2"); !strings.Contains(body, `"name":"my-triton"`) {
				t.Errorf("metadata %s", body)
			}
			if w := warned(l.log); !strings.Contains(w, "--grpc-infer-allocation-pool-size") {
				t.Errorf("warning: %q", w)
			}
		}},
		{"every boolean spelling", self, append([]string{"--model-repository=" + repo, "--strict-readiness", "TRUE", "--exit-on-error=on",
			"--allow-metrics", "1", "--allow-cpu-metrics=False", "--log-warning", "OFF", "--reuse-http-port=0", "--allow-sagemaker", "false",
			"--log-error=On", "--strict-model-config", "0"}, local...), nil},
		{"repeated options", self, append([]string{"--model-repository", repo, "--model-store=" + filepath.Join(dir, "repo"),
			"--model-repository", repo, "--model-control-mode", "EXPLICIT", "--load-model", "simple", "--load-model=plain", "--load-model", "simple",
			"--metrics-config", "summary_latencies=true", "--metrics-config=counter_latencies=false"}, local...), func(t *testing.T, l launched) {
			for _, m := range []string{"simple", "plain"} {
				if status, _ := get(t, l.base+"/v2/models/"+m+"/ready"); status != 200 {
					t.Errorf("%s not ready", m)
				}
			}
		}},
		{"global backend config", self, append([]string{"--model-repository=" + filepath.Join(dir, "repo"), "--backend-config=default-max-batch-size=8",
			"--backend-config", "onnxruntime,enable-global-threadpool=false"}, local...), func(t *testing.T, l launched) {
			if _, body := get(t, l.base+"/v2/models/plain/config"); !strings.Contains(body, `"max_batch_size":8`) {
				t.Errorf("config %s", body)
			}
		}},
		{"tritonserver name", link, append([]string{"--model-repository", repo}, local...), func(t *testing.T, l launched) {
			if status, body := post(t, l.base+"/v2/models/simple/infer", readmeExample); status != 200 {
				t.Errorf("infer %d %s", status, body)
			}
		}},
		{"tritonserver as the first argument", self, append([]string{"tritonserver", "--model-repository=" + repo}, local...), nil},
		{"unique prefix", self, append([]string{"--model-repository=" + repo, "--allow-gpu=false", "--exit-timeout=5"}, local...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { launch(t, tt.argv0, tt.args, tt.check) })
	}
}

// Unknown options and malformed values stop the binary at once with one
// clear line and exit status 2.
func TestLaunchErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--model-repository=/m", "--htp-port=8000"}, "unknown option --htp-port (did you mean --http-port?)"},
		{[]string{"--model-repository=/m", "--no-such-option", "1"}, "unknown option --no-such-option"},
		{[]string{"--model-repository=/m", "--allow-http", "yes"}, `invalid value for --allow-http: invalid value for bool option: "yes"`},
		{[]string{"--model-repository=/m", "--http-port=80a"}, `invalid value for --http-port: "80a" is not an integer`},
		{[]string{"--model-repository=/m", "--cuda-memory-pool-byte-size=4096000000"}, "invalid value for --cuda-memory-pool-byte-size"},
		{[]string{"--model-repository=/m", "--log-info"}, "option --log-info requires a value"},
		{[]string{"--model-repository=/m", "stray"}, `unexpected argument "stray"`},
		// Triton's texts (triton-inference-server/server
		// src/command_line_parser.cc), before any model loads.
		{[]string{"--model-repository=/m", "--grpc-restricted-protocol=model-reposit:k=v"}, "unknown restricted protocol 'model-reposit'"},
		{[]string{"--model-repository=/m", "--grpc-restricted-protocol=health:k=v", "--grpc-restricted-protocol=health,inference:k2=v"},
			"restricted protocol 'health' can not be specified in multiple config groups"},
		{[]string{"--model-repository=/m", "--http-restricted-api=admin:k=v"}, "unknown restricted api 'admin'"},
		{[]string{"--model-repository=/m", "--grpc-max-response-pool-size=0"}, "--grpc-max-response-pool-size must be greater than 0."},
		// A Python backend option out of range fails at startup.
		{[]string{"--model-repository=/m", "--backend-config=python,stub-timeout-seconds=0"}, "stub-timeout-seconds=0: must be a whole number of seconds above 0"},
		{[]string{"--model-repository=/m", "--grpc-infer-thread-count=1"}, "invalid argument for --grpc_infer_thread_count. Must be in the range 2 to 128."},
	}
	for _, tt := range tests {
		argv, _ := json.Marshal(tt.args)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGV="+string(argv))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit status 2", tt.args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
			t.Errorf("%v: output %q, want one line with %q", tt.args, out, tt.want)
		}
	}
}
