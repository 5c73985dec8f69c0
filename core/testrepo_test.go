package core

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/repo"
)

// testRepo writes a repository of models (name → config.pbtxt, each with
// an empty version 1) and opens it.
func testRepo(t testing.TB, models map[string]string) *repo.Set {
	t.Helper()
	root := t.TempDir()
	for name, cfg := range models {
		if err := os.MkdirAll(filepath.Join(root, name, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name, "config.pbtxt"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	return repos
}
