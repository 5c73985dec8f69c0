package onnxrt

import (
	"os"
	"testing"
)

// The telemetry variable as the process started, read before TestMain's New
// initialises ONNX Runtime (package variables are set before TestMain runs).
var telemetryAtStart, telemetrySetAtStart = os.LookupEnv(telemetryEnv)

// TestTelemetryOffBeforeInit checks that the backend TestMain opened left
// ORT_DISABLE_TELEMETRY=1 in the environment ORT read, or the user's value.
// deploy's TestImage proves the effect: without it ORT 1.29.0 crashes in a
// distroless filesystem.
func TestTelemetryOffBeforeInit(t *testing.T) {
	got, ok := os.LookupEnv(telemetryEnv)
	want := "1"
	if telemetrySetAtStart {
		want = telemetryAtStart
	}
	if !ok || got != want {
		t.Errorf("after New, %s = %q (set %v), want %q", telemetryEnv, got, ok, want)
	}
}

func TestDefaultTelemetryOff(t *testing.T) {
	t.Run("unset", func(t *testing.T) {
		t.Setenv(telemetryEnv, "") // restored after the test
		os.Unsetenv(telemetryEnv)
		defaultTelemetryOff()
		if got := os.Getenv(telemetryEnv); got != "1" {
			t.Errorf("%s = %q, want 1", telemetryEnv, got)
		}
	})
	for _, user := range []string{"0", "1", ""} {
		t.Run("user="+user, func(t *testing.T) {
			t.Setenv(telemetryEnv, user)
			defaultTelemetryOff()
			if got, ok := os.LookupEnv(telemetryEnv); !ok || got != user {
				t.Errorf("%s = %q (set %v), want the user's %q", telemetryEnv, got, ok, user)
			}
		})
	}
}
