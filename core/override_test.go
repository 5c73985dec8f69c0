package core

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The load API's files go to a temporary folder that is removed on every
// failing path out of Load (a bad file path, a config that fails) and, after
// a successful load, once the last version loaded from it is closed: a
// reload from new files removes the old folder, an unload the last.
func TestOverrideFilesAreRemoved(t *testing.T) {
	s, _, err := startEcho(t, `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`, true, nil)
	must(t, err)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const good = `{"backend":"echo","input":[{"name":"x","data_type":"TYPE_INT32","dims":[1]}],"output":[{"name":"y","data_type":"TYPE_INT32","dims":[1]}]}`
	tests := []struct {
		name   string
		ov     *LoadOverride
		loads  bool
		reason string
	}{
		{"loads", &LoadOverride{ConfigJSON: good, Files: map[string][]byte{"1/model.bin": []byte("w")}}, true, ""},
		{"escaping path", &LoadOverride{ConfigJSON: good, Files: map[string][]byte{"1/a": []byte("a"), "../b": []byte("b")}}, false, "failed to poll"},
		{"failing config", &LoadOverride{ConfigJSON: `{"backend":"echo","max_batch_size":-1}`, Files: map[string][]byte{"1/model.bin": []byte("w")}}, false, "failed to poll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Load(context.Background(), "m2", tt.ov)
			if (err == nil) != tt.loads || (err != nil && !strings.Contains(err.Error(), tt.reason)) {
				t.Fatalf("load = %v, want success %v or an error naming %q", err, tt.loads, tt.reason)
			}
			if tt.loads && !s.ModelReady("m2", LatestVersion) {
				t.Fatal("model not ready after the override load")
			}
			if tt.loads {
				left, _ := filepath.Glob(filepath.Join(tmp, "inferd-*", "model-m2-*"))
				if len(left) != 1 {
					t.Fatalf("override folders while loaded: %v", left)
				}
				// A reload from new files retires the first folder with its
				// version (closed in the background).
				must(t, s.Load(context.Background(), "m2", tt.ov))
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					now, _ := filepath.Glob(filepath.Join(tmp, "inferd-*", "model-m2-*"))
					if len(now) == 1 && now[0] != left[0] {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("override folders after a reload: %v (first %s)", now, left[0])
					}
				}
				must(t, s.Unload(context.Background(), "m2"))
			}
			// The process's own folder (repo/tempdir) may stay, empty.
			left, _ := filepath.Glob(filepath.Join(tmp, "*", "*"))
			if entries, _ := os.ReadDir(tmp); len(entries) > 1 || len(left) != 0 {
				t.Fatalf("temporary folder not empty: %v %v", entries, left)
			}
		})
	}
}
