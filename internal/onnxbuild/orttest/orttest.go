// Package orttest loads the real ONNX Runtime shared library for tests.
//
// Tests that exercise ORT must not skip silently when the library is missing:
// a green run without ORT would prove nothing. Init therefore fails the test,
// naming `make ort`, when neither ORT_LIB_PATH nor the repository's
// third_party copy exists.
//
// It reads the process environment itself: its variables configure the
// test harness, not the server (docs/environment.md).
package orttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// EnvVar names the environment variable holding the library path.
const EnvVar = "ORT_LIB_PATH"

// RepoLib is where `make ort` puts the library, relative to the module root.
const RepoLib = "third_party/onnxruntime/libonnxruntime.so.1"

var (
	once    sync.Once
	initErr error
	libPath string
)

// LibPath finds the ORT shared library: $ORT_LIB_PATH if set, else RepoLib
// under the module root found by walking up from the working directory
// (go test runs in the package directory).
func LibPath() (string, error) {
	if p := os.Getenv(EnvVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run `make ort`, or fix the variable)", EnvVar, p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find ONNX Runtime: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, RepoLib)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("ONNX Runtime not found: %s unset and %s missing; run `make ort`", EnvVar, p)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("ONNX Runtime not found: " + EnvVar + " unset and no go.mod above the working directory; run `make ort`")
		}
		dir = parent
	}
}

// Init makes sure the ORT environment is up, failing tb if it cannot be. The
// environment is process-wide and set up once; it is left for process exit
// to tear down, since tests in one binary may run in parallel.
func Init(tb testing.TB) {
	tb.Helper()
	once.Do(func() {
		if ort.IsInitialized() {
			return // the code under test got there first
		}
		libPath, initErr = LibPath()
		if initErr != nil {
			return
		}
		ort.SetSharedLibraryPath(libPath)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			initErr = fmt.Errorf("initialize ONNX Runtime from %s: %w", libPath, err)
		}
	})
	if initErr != nil {
		tb.Fatal(initErr)
	}
}
