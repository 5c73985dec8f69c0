package sagemaker

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestServeArgs(t *testing.T) {
	type layout func(t *testing.T, dir string)
	dirs := func(names ...string) layout {
		return func(t *testing.T, dir string) {
			for _, n := range names {
				must(t, os.MkdirAll(filepath.Join(dir, n), 0o755))
			}
		}
	}
	base := []string{"--model-control-mode=explicit", "--allow-sagemaker=true", "--allow-http=false",
		"--sagemaker-port=8080", "--allow-metrics=false", "--sagemaker-thread-count=8", "--log-verbose=1"}
	cases := []struct {
		name    string
		env     map[string]string
		layout  layout
		err     string            // exact validation message
		args    []string          // flags that must be present
		absent  []string          // flag prefixes that must not be
		exports map[string]string // exact
		warn    string            // substring of the warnings
	}{
		// Texts of triton-inference-server/server docker/sagemaker/serve.
		{name: "config at root", layout: func(t *testing.T, d string) {
			must(t, os.WriteFile(filepath.Join(d, "config.pbtxt"), nil, 0o644))
		}, err: "ERROR: Incorrect directory structure."},
		{name: "bad inference type", env: map[string]string{envInferenceType: "predict"}, layout: dirs("m"),
			err: "ERROR: Invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'predict'"},
		{name: "bad inference type MME", env: map[string]string{envMultiModel: "true", envInferenceType: "x"},
			err: "ERROR: Invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'x'"},
		{name: "named default missing", env: map[string]string{envDefaultModel: "nope"}, layout: dirs("m"),
			err: "ERROR: Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME nope does not exist"},
		{name: "named default is a file", env: map[string]string{envDefaultModel: "f"}, layout: func(t *testing.T, d string) {
			must(t, os.WriteFile(filepath.Join(d, "f"), nil, 0o644))
		}, err: "ERROR: Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME f does not exist"},
		{name: "no model", layout: dirs(), err: "ERROR: No model found in model repository"},
		{name: "only a symlink", layout: func(t *testing.T, d string) {
			other := t.TempDir()
			must(t, os.Symlink(other, filepath.Join(d, "link")))
		}, err: "ERROR: No model found in model repository"},
		{name: "two models", layout: dirs("b", "a"),
			err: "ERROR: More than 1 model directories found in model repository. Either provide a single directory or set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME to run the ensemble backend. Directories found: a b"},
		{name: "hidden directory counts", layout: dirs("m", ".cache"), err: "ERROR: More than 1 model directories found in model repository. Either provide a single directory or set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME to run the ensemble backend. Directories found: .cache m"},
		{name: "derived default", layout: dirs("m"), args: append([]string{"--load-model=m"}, base...),
			exports: map[string]string{envDefaultModel: "m", envPingMode: "ready"}, warn: "WARNING: No SAGEMAKER_TRITON_DEFAULT_MODEL_NAME provided."},
		{name: "symlink does not count", layout: func(t *testing.T, d string) {
			dirs("m")(t, d)
			must(t, os.Symlink(t.TempDir(), filepath.Join(d, "link")))
		}, args: []string{"--load-model=m"}, exports: map[string]string{envDefaultModel: "m", envPingMode: "ready"}},
		{name: "named default", env: map[string]string{envDefaultModel: "b"}, layout: dirs("a", "b"),
			args: []string{"--load-model=b"}, exports: map[string]string{envPingMode: "ready"}},
		{name: "named default via symlink", env: map[string]string{envDefaultModel: "link"}, layout: func(t *testing.T, d string) {
			must(t, os.Symlink(t.TempDir(), filepath.Join(d, "link")))
		}, args: []string{"--load-model=link"}, exports: map[string]string{envPingMode: "ready"}},
		// MME skips the SME checks and loads nothing.
		{name: "MME", env: map[string]string{envMultiModel: "true"}, layout: func(t *testing.T, d string) {
			must(t, os.WriteFile(filepath.Join(d, "config.pbtxt"), nil, 0o644))
		}, args: base, absent: []string{"--load-model"}, exports: map[string]string{envPingMode: "live"}},
		{name: "MME only when true", env: map[string]string{envMultiModel: "TRUE"}, layout: dirs(),
			err: "ERROR: No model found in model repository"},
		// Ping mode precedence: explicit > override > mode default.
		{name: "override ping SME", env: map[string]string{envOverridePing: "live"}, layout: dirs("m"),
			exports: map[string]string{envDefaultModel: "m", envPingMode: "live"}},
		{name: "override ping MME", env: map[string]string{envMultiModel: "true", envOverridePing: "ready"},
			exports: map[string]string{envPingMode: "ready"}},
		{name: "explicit ping wins", env: map[string]string{envMultiModel: "true", envOverridePing: "ready", envPingMode: "live"},
			exports: map[string]string{envPingMode: "live"}},
		// The env table of docker/sagemaker/serve.
		{name: "env flags", layout: dirs("m"), env: map[string]string{
			"SAGEMAKER_BIND_TO_PORT": "8000", "SAGEMAKER_SAFE_PORT_RANGE": "8081-9000",
			"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "8082",
			"SAGEMAKER_TRITON_THREAD_COUNT": "16", "SAGEMAKER_TRITON_LOG_VERBOSE": "false", "SAGEMAKER_TRITON_LOG_INFO": "true",
			envInferenceType: "generate_stream",
		}, args: []string{"--sagemaker-port=8000", "--sagemaker-safe-port-range=8081-9000", "--allow-metrics=true",
			"--metrics-port=8082", "--sagemaker-thread-count=16", "--log-verbose=0", "--log-info=true", "--allow-http=false", "--allow-grpc=false"},
			absent: []string{"--sagemaker-port=8080", "--allow-metrics=false", "--allow-grpc=true"}},
		{name: "grpc", layout: dirs("m"), env: map[string]string{"SAGEMAKER_TRITON_ALLOW_GRPC": "true", "SAGEMAKER_TRITON_GRPC_PORT": "9001"},
			args: []string{"--allow-grpc=true", "--grpc-port=9001"}},
		{name: "log switches", layout: dirs("m"), env: map[string]string{"SAGEMAKER_TRITON_LOG_WARNING": "false", "SAGEMAKER_TRITON_LOG_ERROR": "true"},
			args: []string{"--log-warning=false", "--log-error=true"}},
		{name: "numeric log level", layout: dirs("m"), env: map[string]string{"SAGEMAKER_TRITON_LOG_VERBOSE": "2"}, args: []string{"--log-verbose=2"}},
		{name: "additional args", layout: dirs("m"), env: map[string]string{"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "  --load-model=extra\t--strict-readiness=false \n"},
			args: []string{"--load-model=m", "--load-model=extra", "--strict-readiness=false"}},
		{name: "ignored settings", layout: dirs("m"), env: map[string]string{
			"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8", "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "1",
			"SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "2", "SAGEMAKER_TRITON_TENSORFLOW_VERSION": "2",
		}, absent: []string{"--model-load-gpu-limit", "--buffer-manager-thread-count", "--backend-config"},
			warn: "WARNING: ignoring SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT=0.8"},
		// Namespacing is on by default; the variable's value is the flag's.
		{name: "namespacing by default", layout: dirs("m"), args: []string{"--model-namespacing=true"}},
		{name: "namespacing disabled", layout: dirs("m"), env: map[string]string{"SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING": "false"},
			args: []string{"--model-namespacing=false"}, absent: []string{"--model-namespacing=true"}},
		{name: "namespacing MME", env: map[string]string{envMultiModel: "true"}, args: []string{"--model-namespacing=true"}},
		// The body limit: explicit bytes (asynchronous inference takes up
		// to 1 GB), else a transform job's larger MaxPayloadInMB.
		{name: "max input size", layout: dirs("m"), env: map[string]string{envMaxInputSize: "1073741824", envMaxPayloadInMB: "100"},
			args: []string{"--http-max-input-size=1073741824"}, absent: []string{"--http-max-input-size=104857600"}},
		{name: "batch payload", layout: dirs("m"), env: map[string]string{envBatch: "true", envMaxPayloadInMB: "100"},
			args: []string{"--http-max-input-size=104857600"}},
		{name: "small batch payload", layout: dirs("m"), env: map[string]string{envBatch: "true", envMaxPayloadInMB: "6"},
			absent: []string{"--http-max-input-size"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			modelDir, mmeDir := t.TempDir(), filepath.Join(t.TempDir(), "sagemaker")
			if c.layout != nil {
				c.layout(t, modelDir)
			}
			var stderr bytes.Buffer
			args, exports, err := ServeArgs(func(k string) string { return c.env[k] }, ServeConfig{ModelDir: modelDir, MMEDir: mmeDir, Stderr: &stderr})
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			repoFlag := "--model-repository=" + modelDir
			if c.env[envMultiModel] == "true" {
				repoFlag = "--model-repository=" + mmeDir
				if st, err := os.Stat(mmeDir); err != nil || !st.IsDir() {
					t.Errorf("MME placeholder not created: %v", err)
				}
			}
			if args[0] != repoFlag {
				t.Errorf("args[0] = %q, want %q", args[0], repoFlag)
			}
			for _, a := range append([]string{"--model-control-mode=explicit", "--allow-sagemaker=true", "--allow-http=false"}, c.args...) {
				if !slices.Contains(args, a) {
					t.Errorf("missing %s in %q", a, args)
				}
			}
			for _, p := range c.absent {
				for _, a := range args {
					if strings.HasPrefix(a, p) {
						t.Errorf("unexpected %s in %q", a, args)
					}
				}
			}
			if c.exports != nil && !equalMaps([]map[string]string{exports}, []map[string]string{c.exports}) {
				t.Errorf("exports %v, want %v", exports, c.exports)
			}
			if !strings.Contains(stderr.String(), c.warn) {
				t.Errorf("stderr %q, want %q", stderr.String(), c.warn)
			}
		})
	}
}

func TestOptionsFromEnv(t *testing.T) {
	o := OptionsFromEnv(func(string) string { return "" })
	if o.DefaultModel != unspecifiedModel || o.PingMode != "ready" || o.InferenceType != "infer" || o.ModelsRoot != "/opt/ml/models" {
		t.Errorf("defaults %+v", o)
	}
	env := map[string]string{envDefaultModel: "m", envPingMode: "live", envInferenceType: "generate"}
	o = OptionsFromEnv(func(k string) string { return env[k] })
	if o.DefaultModel != "m" || o.PingMode != "live" || o.InferenceType != "generate" {
		t.Errorf("from env %+v", o)
	}
}
