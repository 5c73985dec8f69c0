package core

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/repo"
)

// --model-load-retry-count: a version whose load fails is tried again that
// many times before it is UNAVAILABLE.
func TestLoadRetries(t *testing.T) {
	tests := []struct {
		retries, failures int
		ready             bool
	}{
		{0, 1, false},
		{2, 2, true},
		{1, 2, false},
		{3, 0, true},
	}
	for _, tt := range tests {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "m", "1"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "m", "config.pbtxt"), []byte(`backend: "echo"
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`), 0o644))
		repos, err := repo.OpenAll(context.Background(), []string{root})
		must(t, err)
		b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
		b.failNew.Store(int32(tt.failures))
		s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, LoadRetries: tt.retries,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		err = s.Load(context.Background(), "m", nil)
		if (err == nil) != tt.ready || s.ModelReady("m", LatestVersion) != tt.ready {
			t.Errorf("%d retries, %d failures: load %v, want ready %v", tt.retries, tt.failures, err, tt.ready)
		}
		s.Shutdown(context.Background())
	}
}
