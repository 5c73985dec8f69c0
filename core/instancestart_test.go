package core

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/inferd/inferd/repo"
)

// Each instance's start time is kept on its version and logged on the
// model's load line.
func TestInstanceStarts(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "m", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "m", "config.pbtxt"), []byte(`backend: "echo"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU }, { name: "side" count: 1 kind: KIND_CPU } ]`), 0o644))
	repos, err := repo.OpenAll(context.Background(), []string{root})
	must(t, err)
	logs := &lockedBuffer{}
	b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	must(t, s.Start(context.Background()))
	defer s.Shutdown(context.Background())

	versions := s.ReadyVersions("")
	if len(versions) != 1 {
		t.Fatalf("%d ready versions, want 1", len(versions))
	}
	starts := versions[0].InstanceStarts()
	var names []string
	for _, st := range starts {
		names = append(names, st.Instance)
		if st.Duration <= 0 {
			t.Errorf("instance %s started in %v", st.Instance, st.Duration)
		}
	}
	if got, want := names, []string{"m_0_0", "m_0_1", "side_0"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("starts of %v, want %v", got, want)
	}
	line := regexp.MustCompile(`msg="loaded model" model=m .*instance_start="m_0_0=[0-9.]+[µnm]?s m_0_1=[0-9.]+[µnm]?s side_0=[0-9.]+[µnm]?s"`)
	if !line.MatchString(logs.String()) {
		t.Errorf("no load line with the instance starts in:\n%s", logs.String())
	}
}

func TestStartsText(t *testing.T) {
	one := &ModelVersion{starts: []InstanceStart{{"m_0", 1500 * time.Microsecond}, {"m_1", 2 * time.Second}}}
	two := &ModelVersion{starts: []InstanceStart{{"m_0", 30 * time.Millisecond}}}
	for _, c := range []struct {
		name     string
		fresh    map[int64]*ModelVersion
		versions []int64
		want     string
	}{
		{"one version", map[int64]*ModelVersion{1: one}, []int64{1}, "m_0=1.5ms m_1=2s"},
		{"two versions", map[int64]*ModelVersion{1: one, 3: two}, []int64{1, 3}, "v1:m_0=1.5ms v1:m_1=2s v3:m_0=30ms"},
		{"an ensemble", map[int64]*ModelVersion{1: {}}, []int64{1}, ""},
	} {
		if got := startsText(c.fresh, c.versions); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
