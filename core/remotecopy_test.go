package core

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/repo"
)

// memStore is an in-memory repo.Store.
type memStore struct {
	mu      sync.Mutex
	objects map[string]string
}

func (m *memStore) String() string { return "mem://bucket" }

func (m *memStore) List(_ context.Context, prefix string) ([]repo.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []repo.Object
	for k, v := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, repo.Object{Key: k, Size: int64(len(v)), Version: fmt.Sprint(len(v), v), Modified: time.Unix(1, 0)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memStore) Download(_ context.Context, key, path string) (repo.Object, error) {
	m.mu.Lock()
	v, ok := m.objects[key]
	m.mu.Unlock()
	if !ok {
		return repo.Object{}, fmt.Errorf("no object %s", key)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return repo.Object{}, err
	}
	return repo.Object{Key: key}, os.WriteFile(path, []byte(v), 0o644)
}

func (m *memStore) put(key, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = v
}

// TestRemoteCopyLifetime: a remote model's local copy stays while the
// model is loaded (a reload keeps it), goes when the model unloads or its
// load fails, and comes back with the next load.
func TestRemoteCopyLifetime(t *testing.T) {
	const cfg = `backend: "echo"
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`
	st := &memStore{objects: map[string]string{"m/config.pbtxt": cfg, "m/1/model.bin": "w"}}
	cache := t.TempDir()
	repos := &repo.Set{Sources: []repo.Source{repo.OpenOptions{CacheDir: cache}.Remote(st)}}
	b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"}, StrictReadiness: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, s.Start(context.Background()))
	copies := func() []string {
		found, _ := filepath.Glob(filepath.Join(cache, "*", "m", "1", "model.bin"))
		return found
	}
	waitCopies := func(want int, why string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); len(copies()) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d local copies, want %d", why, len(copies()), want)
			}
		}
	}
	waitCopies(1, "loaded")
	// A reload from changed files replaces the version; the copy stays.
	st.put("m/1/model.bin", "w2")
	must(t, s.Load(context.Background(), "m", nil))
	time.Sleep(100 * time.Millisecond) // the old version closes in the background
	waitCopies(1, "reloaded")
	must(t, s.Unload(context.Background(), "m"))
	waitCopies(0, "unloaded")
	must(t, s.Load(context.Background(), "m", nil))
	waitCopies(1, "loaded again")
	must(t, s.Unload(context.Background(), "m"))
	waitCopies(0, "unloaded again")
	// A load that fails leaves nothing either.
	st.put("m/config.pbtxt", cfg+"max_batch_size: -1\n")
	if err := s.Load(context.Background(), "m", nil); err == nil {
		t.Fatal("a bad config loaded")
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "*", "m")); len(entries) != 0 {
		t.Fatalf("a failed load left %v", entries)
	}
}
