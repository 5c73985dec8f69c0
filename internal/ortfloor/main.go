// Command ortfloor is the floor of inferd's footprint benchmark
// (BenchmarkFootprint in platforms/httpapi, BENCHMARKS.md section 4): a Go
// program that loads ONNX Runtime and creates the sessions inferd creates
// for a model repository's ONNX models, with inferd's session options, and
// nothing else: no model configs, schedulers, listeners or metrics.
//
//	ortfloor -lib third_party/onnxruntime/libonnxruntime.so.1 examples/model_repository
//
// Every model folder's highest numeric version with a model.onnx gets
// -instances sessions (2 by default: what a CPU instance group without a
// count gets for the onnxruntime backend, as in Triton's
// triton-inference-server/core src/model_config_utils.cc). Once they exist
// it writes "ready" on stdout and idles until SIGTERM or SIGINT.
//
// It reads the process environment itself (ORT_LIB_PATH, the default of
// -lib; ORT_DISABLE_TELEMETRY, set as inferd sets it): it is a benchmark
// harness, not the server (docs/environment.md).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	ort "github.com/yalue/onnxruntime_go"
)

func main() {
	lib := flag.String("lib", os.Getenv("ORT_LIB_PATH"), "the ONNX Runtime shared library")
	instances := flag.Int("instances", 2, "sessions per model")
	flag.Parse()
	if flag.NArg() != 1 || *lib == "" {
		fmt.Fprintln(os.Stderr, "usage: ortfloor [-instances N] -lib libonnxruntime.so REPOSITORY")
		os.Exit(2)
	}
	sessions, err := open(*lib, flag.Arg(0), *instances)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ortfloor:", err)
		os.Exit(1)
	}
	fmt.Println("ready", len(sessions))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, s := range sessions {
		_ = s.Destroy()
	}
	_ = ort.DestroyEnvironment()
}

// open initialises ONNX Runtime from lib and creates instances sessions of
// every model of repository.
func open(lib, repository string, instances int) ([]*ort.DynamicAdvancedSession, error) {
	// inferd turns ORT's telemetry off unless asked (core/onnxrt).
	if _, set := os.LookupEnv("ORT_DISABLE_TELEMETRY"); !set {
		_ = os.Setenv("ORT_DISABLE_TELEMETRY", "1")
	}
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(ort.WithLogLevelWarning()); err != nil {
		return nil, fmt.Errorf("initialize ONNX Runtime from %s: %w", lib, err)
	}
	models, err := modelFiles(repository)
	if err != nil {
		return nil, err
	}
	var sessions []*ort.DynamicAdvancedSession
	for _, path := range models {
		for range instances {
			s, err := newSession(path)
			if err != nil {
				return nil, err
			}
			sessions = append(sessions, s)
		}
	}
	return sessions, nil
}

// modelFiles lists the model.onnx of each model folder's highest numeric
// version.
func modelFiles(repository string) ([]string, error) {
	models, err := os.ReadDir(repository)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, m := range models {
		versions, err := os.ReadDir(filepath.Join(repository, m.Name()))
		if err != nil {
			continue // not a model folder
		}
		best, path := int64(-1), ""
		for _, v := range versions {
			n, err := strconv.ParseInt(v.Name(), 10, 64)
			p := filepath.Join(repository, m.Name(), v.Name(), "model.onnx")
			if err != nil || n <= best {
				continue
			}
			if _, err := os.Stat(p); err == nil {
				best, path = n, p
			}
		}
		if path != "" {
			files = append(files, path)
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no model.onnx in " + repository)
	}
	return files, nil
}

// newSession creates one session of path with the options inferd gives a
// model that sets none (core/onnxrt's newSessionOptions): all graph
// optimisations, sequential execution, default thread counts, thread-pool
// spinning off.
func newSession(path string) (*ort.DynamicAdvancedSession, error) {
	inputs, outputs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	for _, set := range []error{
		so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll),
		so.SetExecutionMode(ort.ExecutionModeSequential),
		so.AddSessionConfigEntry("session.inter_op.allow_spinning", "0"),
		so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"),
	} {
		if set != nil {
			return nil, fmt.Errorf("session options: %w", set)
		}
	}
	s, err := ort.NewDynamicAdvancedSession(path, names(inputs), names(outputs), so)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func names(infos []ort.InputOutputInfo) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.Name
	}
	return out
}
