package core

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/repo"
)

// TestNamespacedResponseCache: two repositories' models of one name and
// version are two models to the response cache too: the same request to
// each misses once and runs each model (Triton keys the cache by name
// alone, triton-inference-server/core src/cache_manager.cc, so there the
// second would get the first model's answer).
func TestNamespacedResponseCache(t *testing.T) {
	ctx := context.Background()
	roots := []string{t.TempDir(), t.TempDir()}
	for _, root := range roots {
		if err := os.MkdirAll(filepath.Join(root, "m", "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "m", "config.pbtxt"), []byte("backend: \"echo\"\n"+cacheOn), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := repo.OpenAll(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, Namespacing: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ResponseCache: cache.NewLocalSize(1 << 20)})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	for _, root := range roots {
		mv, release, err := s.acquireKey(repo.Key(root, "m"), LatestVersion)
		if err != nil {
			t.Fatal(err)
		}
		_, err = mv.Infer(ctx, batchReq(1, 2, 3))
		release()
		if err != nil {
			t.Fatal(err)
		}
		if st := mv.Stats.Snapshot(); st.CacheHit.Count != 0 || st.CacheMiss.Count != 1 {
			t.Errorf("%s::m: %d hits, %d misses; want 0, 1", root, st.CacheHit.Count, st.CacheMiss.Count)
		}
	}
	if n := b.execs.Load(); n != 2 {
		t.Errorf("executions = %d, want 2 (one per repository's model)", n)
	}
}
