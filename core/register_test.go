package core

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestRegisterRepository(t *testing.T) {
	s, _, err := startEcho(t, "max_batch_size: 1\n"+`input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An artifact whose folder "model" holds a config named otherwise is
	// served under the registered name.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "model", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "name: \"original\"\nbackend: \"echo\"\nmax_batch_size: 1\n" + `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	if err := os.WriteFile(filepath.Join(root, "model", "config.pbtxt"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.RegisterRepository(root, map[string]string{"model": "served.tar.gz"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterRepository(root, nil); CodeOf(err) != CodeAlreadyExists {
		t.Fatalf("second registration: %v, want ALREADY_EXISTS", err)
	}
	if err := s.Load(ctx, "served.tar.gz", nil); err != nil {
		t.Fatal(err)
	}
	req := batchReq(4, 1, 1)
	req.ModelName = "served.tar.gz"
	if _, err := s.Infer(ctx, req); err != nil {
		t.Fatalf("infer on the registered model: %v", err)
	}
	if err := s.Unload(ctx, "served.tar.gz"); err != nil {
		t.Fatal(err)
	}
	if err := s.UnregisterRepository(root); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	_, kept := s.models["served.tar.gz"]
	s.mu.RUnlock()
	if kept {
		t.Fatal("an unloaded model of an unregistered repository kept its state")
	}
	if err := s.UnregisterRepository(root); CodeOf(err) != CodeNotFound {
		t.Fatalf("second unregistration: %v, want NOT_FOUND", err)
	}
	if err := s.Load(ctx, "served.tar.gz", nil); err == nil {
		t.Fatal("loaded a model of an unregistered repository")
	}
}
