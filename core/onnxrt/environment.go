package onnxrt

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// env tracks the one ONNX Runtime environment of the process. ORT itself is
// process-global (onnxruntime_go dlopens one library and keeps one OrtEnv in
// package variables), so a package-level guard is the honest model of it:
// every Backend and every open instance holds a reference, and the last
// release tears the environment down, so no session outlives it.
var env struct {
	mu   sync.Mutex
	refs int
	lib  string // resolved library path; "" when adopted
	// owned is false when something else (a test helper, another package)
	// initialised ORT first: then it is theirs to destroy, not ours.
	owned bool
}

// acquireEnv takes a reference to the environment, initialising it from lib
// on first use. A second backend asking for a different library fails: one
// process cannot hold two ORT builds.
func acquireEnv(lib string, level slog.Level) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	resolved := resolvePath(lib)
	if env.refs > 0 {
		if env.lib != "" && env.lib != resolved {
			return fmt.Errorf("ONNX Runtime is already loaded from %s; cannot also load %s in the same process", env.lib, lib)
		}
		env.refs++
		return nil
	}
	if ort.IsInitialized() {
		env.refs, env.lib, env.owned = 1, "", false
		loadAPI(resolved) // assuming it is the same library; checked by RTLD_NOLOAD
		return nil
	}
	defaultTelemetryOff()
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(ortLogLevel(level)); err != nil {
		return fmt.Errorf("initialize ONNX Runtime from %s: %w", lib, err)
	}
	// Stops telemetry events for the rest of the process; the crash above
	// happens before this call could help.
	_ = ort.DisableTelemetry()
	loadAPI(resolved)
	env.refs, env.lib, env.owned = 1, resolved, true
	return nil
}

// retainEnv adds a reference for a live Backend's use (an instance, a
// graph read); the Backend holds one already, so the environment is up.
func retainEnv() {
	env.mu.Lock()
	env.refs++
	env.mu.Unlock()
}

// releaseEnv drops a reference, destroying the environment with the last.
func releaseEnv() error {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.refs == 0 {
		return nil
	}
	env.refs--
	if env.refs > 0 {
		return nil
	}
	unloadAPI()
	if !env.owned {
		return nil
	}
	env.lib, env.owned = "", false
	if err := ort.DestroyEnvironment(); err != nil {
		return fmt.Errorf("destroy ONNX Runtime environment: %w", err)
	}
	return nil
}

// telemetryEnv is read by ONNX Runtime when it creates its environment.
const telemetryEnv = "ORT_DISABLE_TELEMETRY"

// defaultTelemetryOff sets ORT_DISABLE_TELEMETRY=1 unless the user set it.
// ORT 1.29.0's POSIX telemetry, on by default, crashes CreateOrtEnv when
// /etc/machine-id is missing or empty and there is no /bin/sh (distroless,
// chiseled and most scratch images): its device-id fallback popen()s a shell
// and then calls pclose(NULL). microsoft/onnxruntime#32173, fixed by #32226.
// The variable must be in the C environment before CreateOrtEnv runs; with
// cgo, os.Setenv writes it there. Whether the user set it is read here,
// from the process environment, because that environment is what ONNX
// Runtime itself reads, not a setting of the server.
func defaultTelemetryOff() {
	if _, set := os.LookupEnv(telemetryEnv); !set {
		_ = os.Setenv(telemetryEnv, "1")
	}
}

func resolvePath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p
}

// ortLogLevel follows the server's log level, as Triton's backend does:
// verbose logging → VERBOSE, warnings → WARNING, otherwise ERROR.
func ortLogLevel(level slog.Level) ort.EnvironmentOption {
	switch {
	case level <= slog.LevelDebug:
		return ort.WithLogLevelVerbose()
	case level <= slog.LevelWarn:
		return ort.WithLogLevelWarning()
	}
	return ort.WithLogLevelError()
}
