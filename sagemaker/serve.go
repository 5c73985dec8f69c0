package sagemaker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/inferd/inferd/platforms/httpapi"
)

// ServeConfig locates the directories the `serve` entrypoint inspects.
type ServeConfig struct {
	// ModelDir is the single-model artifact directory (default /opt/ml/model).
	ModelDir string
	// MMEDir is the empty placeholder repository of a multi-model endpoint
	// (default /tmp/sagemaker); it must not be /opt/ml/models, whose
	// per-artifact folders are not models.
	MMEDir string
	// Stderr receives the WARNING lines the entrypoint prints (the derived
	// default model, env settings inferd ignores); nil means os.Stderr.
	Stderr io.Writer
}

// Env names read by the entrypoint and the frontend.
const (
	envMultiModel    = "SAGEMAKER_MULTI_MODEL"
	envDefaultModel  = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
	envPingMode      = "SAGEMAKER_TRITON_PING_MODE"
	envOverridePing  = "SAGEMAKER_TRITON_OVERRIDE_PING_MODE"
	envInferenceType = "SAGEMAKER_TRITON_INFERENCE_TYPE"
	envNamespacing   = "SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING"
	envMetricsPath   = "SAGEMAKER_TRITON_METRICS_PATH"
	envMaxInputSize  = "SAGEMAKER_TRITON_MAX_INPUT_SIZE"
	// envModelServerTimeout is the SageMaker inference toolkit's name for
	// a model server's response timeout, in seconds.
	envModelServerTimeout = "SAGEMAKER_MODEL_SERVER_TIMEOUT"

	// unspecifiedModel is the server's default model when none was named;
	// /invocations on it fails with Triton's unknown-model message.
	unspecifiedModel = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
)

// flagEnv maps env vars that become inferd flags verbatim
// ("--<flag>=<value>"), in the order the flags are emitted.
var flagEnv = []struct{ env, flag, def string }{
	{"SAGEMAKER_BIND_TO_PORT", "sagemaker-port", "8080"},
	{"SAGEMAKER_SAFE_PORT_RANGE", "sagemaker-safe-port-range", ""},
	{"SAGEMAKER_TRITON_ALLOW_METRICS", "allow-metrics", "false"},
	{"SAGEMAKER_TRITON_METRICS_PORT", "metrics-port", ""},
	{"SAGEMAKER_TRITON_THREAD_COUNT", "sagemaker-thread-count", "8"},
	{"SAGEMAKER_TRITON_LOG_VERBOSE", "log-verbose", "true"},
	{"SAGEMAKER_TRITON_LOG_INFO", "log-info", ""},
	{"SAGEMAKER_TRITON_LOG_WARNING", "log-warning", ""},
	{"SAGEMAKER_TRITON_LOG_ERROR", "log-error", ""},
	{"SAGEMAKER_TRITON_ALLOW_GRPC", "allow-grpc", "false"},
	{"SAGEMAKER_TRITON_GRPC_PORT", "grpc-port", ""},
}

// ignoredEnv are settings Triton's `serve` turns into flags for features
// inferd does not have; they are accepted so existing endpoint configs keep
// working, and reported by IgnoredEnv.
var ignoredEnv = []struct{ env, why string }{
	{"SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT", "inferd has no buffer manager"},
	{"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", "inferd's Python backend sizes its own shared memory (--backend-config=python,tensor-arena-byte-size)"},
	{"SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", "inferd's Python backend sizes its own shared memory (--backend-config=python,tensor-arena-byte-size)"},
	{"SAGEMAKER_TRITON_TENSORFLOW_VERSION", "inferd has no tensorflow backend"},
	{"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT", "inferd has no model load GPU limit"},
}

// IgnoredEnv lists, as "NAME=value: reason", the SageMaker settings that are
// set in the environment but have no inferd equivalent.
func IgnoredEnv(getenv func(string) string) []string {
	var out []string
	for _, e := range ignoredEnv {
		if v := getenv(e.env); v != "" {
			out = append(out, e.env+"="+v+": "+e.why)
		}
	}
	return out
}

// ServeArgs is the `serve` entrypoint (Triton's is the script
// triton-inference-server/server docker/sagemaker/serve): it validates the
// SageMaker environment and returns the inferd flags to run with, plus env
// vars the server process must see (exports). Validation failures return
// the exact line Triton's script prints. Settings inferd does not support
// are written to cfg.Stderr as warnings (see IgnoredEnv).
func ServeArgs(getenv func(string) string, cfg ServeConfig) (args []string, exports map[string]string, err error) {
	if cfg.ModelDir == "" {
		cfg.ModelDir = "/opt/ml/model"
	}
	if cfg.MMEDir == "" {
		cfg.MMEDir = "/tmp/sagemaker"
	}
	stderr := cfg.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	mme := getenv(envMultiModel) == "true"
	exports = map[string]string{}

	// Checks run in the script's order: layout, inference type, default model.
	if !mme {
		if _, err := os.Stat(filepath.Join(cfg.ModelDir, "config.pbtxt")); err == nil {
			return nil, nil, serveError("ERROR: Incorrect directory structure.")
		}
	}
	switch t := getenv(envInferenceType); t {
	case "", "infer", "generate", "generate_stream":
	default:
		return nil, nil, fmt.Errorf("ERROR: Invalid SAGEMAKER_TRITON_INFERENCE_TYPE '%s'", t)
	}

	var repository, ping string
	if mme {
		repository, ping = cfg.MMEDir, "live"
		if err := os.MkdirAll(cfg.MMEDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("ERROR: cannot create %s: %v", cfg.MMEDir, err)
		}
	} else {
		repository, ping = cfg.ModelDir, "ready"
		model, derived, err := defaultModel(getenv(envDefaultModel), cfg.ModelDir)
		if err != nil {
			return nil, nil, err
		}
		if derived {
			fmt.Fprintln(stderr, "WARNING: No SAGEMAKER_TRITON_DEFAULT_MODEL_NAME provided.")
			exports[envDefaultModel] = model
		}
		args = append(args, "--load-model="+model)
	}
	// Triton's script never exports the ping mode (a bug); inferd
	// exports the intended value, with an operator-set one winning.
	if v := getenv(envOverridePing); v != "" {
		ping = v
	}
	if v := getenv(envPingMode); v != "" {
		ping = v
	}
	exports[envPingMode] = ping

	// Namespacing is on unless the variable says otherwise; its value is
	// the flag's, as in the script (so "false" is what disables it).
	namespacing := getenv(envNamespacing)
	if namespacing == "" {
		namespacing = "true"
	}
	args = append([]string{
		"--model-repository=" + repository,
		"--model-namespacing=" + namespacing,
		"--model-control-mode=explicit",
	}, args...)
	args = append(args, "--allow-sagemaker=true", "--allow-http=false")
	for _, f := range flagEnv {
		v := getenv(f.env)
		if v == "" {
			v = f.def
		}
		if v == "" {
			continue
		}
		if f.flag == "log-verbose" {
			v = boolToLevel(v)
		}
		args = append(args, "--"+f.flag+"="+v)
	}
	// The /invocations body limit (--http-max-input-size): the variable's
	// bytes, or in a transform job its MaxPayloadInMB where that exceeds
	// the default, so the mini-batches the job sends are read whole.
	if v := getenv(envMaxInputSize); v != "" {
		args = append(args, "--http-max-input-size="+v)
	} else if mb := int64(batchFromEnv(getenv).MaxPayloadInMB) << 20; mb > httpapi.DefaultMaxInputSize {
		args = append(args, "--http-max-input-size="+strconv.FormatInt(mb, 10))
	}
	for _, line := range IgnoredEnv(getenv) {
		fmt.Fprintln(stderr, "WARNING: ignoring "+line)
	}
	// Unquoted expansion in the script: split on white space, no quoting.
	args = append(args, strings.Fields(getenv("SAGEMAKER_TRITON_ADDITIONAL_ARGS"))...)
	return args, exports, nil
}

// serveError is a validation failure; its text is the exact line Triton's
// script prints (some end in a period, which errors.New style forbids).
type serveError string

func (e serveError) Error() string { return string(e) }

// boolToLevel maps the script's boolean --log-verbose values onto inferd's
// integer level (Triton accepts both spellings).
func boolToLevel(v string) string {
	switch strings.ToLower(v) {
	case "true":
		return "1"
	case "false":
		return "0"
	}
	return v
}

// defaultModel picks the single-model endpoint's model. derived reports
// that it came from the only sub-directory rather than the env var.
func defaultModel(name, dir string) (model string, derived bool, err error) {
	if name != "" {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || !st.IsDir() {
			return "", false, fmt.Errorf("ERROR: Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME %s does not exist", name)
		}
		return name, false, nil
	}
	// Hidden directories count and symlinks do not, as with the script's
	// `find -maxdepth 1 -type d`.
	entries, _ := os.ReadDir(dir)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	switch len(dirs) {
	case 0:
		return "", false, errors.New("ERROR: No model found in model repository")
	case 1:
		return dirs[0], true, nil
	}
	sort.Strings(dirs)
	return "", false, fmt.Errorf("ERROR: More than 1 model directories found in model repository. Either provide a single directory or set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME to run the ensemble backend. Directories found: %s", strings.Join(dirs, " "))
}
