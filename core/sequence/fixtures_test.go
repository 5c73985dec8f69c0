package sequence_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo"
)

// The fixtures of core's own tests that the sequence tests share.

const oneInstance = "instance_group [ { kind: KIND_CPU count: 1 } ]\n"

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

// stats are model m's statistics.
func stats(t *testing.T, s *core.Server) core.StatsSnapshot {
	t.Helper()
	mv, release, err := s.Acquire("m", core.LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	return mv.Stats.Snapshot()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
