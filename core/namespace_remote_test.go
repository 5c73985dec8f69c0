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

// namedStore is a memStore under a root name of its own.
type namedStore struct {
	*memStore
	name string
}

func (n namedStore) String() string { return n.name }

// TestNamespacingRemote: a remote root's model of a name a local root also
// holds loads under the remote root's namespace, its files fetched and
// fingerprinted by the model's name (not its namespaced key), and reloads
// as a no-op while they are unchanged.
func TestNamespacingRemote(t *testing.T) {
	const cfg = `backend: "echo"
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`
	ctx := context.Background()
	local := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(local, "m", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(local, "m", "config.pbtxt"), []byte(cfg), 0o644))
	st := namedStore{&memStore{objects: map[string]string{"m/config.pbtxt": cfg, "m/1/model.bin": "w", "m/2/model.bin": "w"}}, "mem://other"}
	dir, err := repo.OpenDir(local)
	must(t, err)
	repos := &repo.Set{Sources: []repo.Source{dir, repo.OpenOptions{CacheDir: t.TempDir()}.Remote(st)}}
	b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"}, Namespacing: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, s.Start(ctx))
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	for _, c := range []struct {
		root    string
		version int64
	}{{local, 1}, {"mem://other", 2}} {
		mv, release, err := s.acquireKey(repo.Key(c.root, "m"), LatestVersion)
		if err != nil {
			t.Fatalf("%s::m: %v", c.root, err)
		}
		release()
		if mv.Version != c.version || mv.Namespace != c.root || mv.Name != "m" {
			t.Errorf("%s::m serves %s::%s version %d", c.root, mv.Namespace, mv.Name, mv.Version)
		}
	}
	before, release, err := s.acquireKey(repo.Key("mem://other", "m"), LatestVersion)
	must(t, err)
	release()
	must(t, s.Load(ctx, "m", nil))
	after, release, err := s.acquireKey(repo.Key("mem://other", "m"), LatestVersion)
	must(t, err)
	release()
	if before != after {
		t.Error("an unchanged remote model was reloaded")
	}
}
