package dynamic_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/repo"
)

// pipeBackend serves echo instances that pipeline (Depth 2) and records
// which instance ran each execution, in start order.
type pipeBackend struct {
	*echoBackend
	mu    sync.Mutex
	n     int
	ranOn []int
}

func (b *pipeBackend) NewInstance(ctx context.Context, spec core.InstanceSpec) (core.Instance, error) {
	inner, err := b.echoBackend.NewInstance(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	return &pipeInstance{Instance: inner, b: b, id: b.n}, nil
}

type pipeInstance struct {
	core.Instance
	b  *pipeBackend
	id int
}

func (i *pipeInstance) Depth() int { return 2 }

func (i *pipeInstance) Execute(ctx context.Context, e *core.Execution) error {
	i.b.mu.Lock()
	i.b.ranOn = append(i.b.ranOn, i.id)
	i.b.mu.Unlock()
	return i.Instance.Execute(ctx, e)
}

func (b *pipeBackend) instances() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.ranOn...)
}

func pipeServer(t *testing.T, count int) (*core.Server, *pipeBackend) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `backend: "echo"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1, 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1, 1 ] } ]
instance_group [ { kind: KIND_CPU count: ` + string(rune('0'+count)) + ` } ]
`
	if err := os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	b := &pipeBackend{echoBackend: &echoBackend{started: make(chan int, 64), gate: make(chan struct{})}}
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"m"}, StrictReadiness: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.echoBackend.mu.Lock()
		b.echoBackend.open = true
		b.echoBackend.mu.Unlock()
		close(b.gate)
		s.Shutdown(context.Background())
	})
	return s, b
}

// TestPipelinedInstances: an instance that pipelines takes a second
// execution while its first runs, but only when no other instance is idle.
func TestPipelinedInstances(t *testing.T) {
	t.Run("one instance takes the next request while busy", func(t *testing.T) {
		s, b := pipeServer(t, 1)
		a := &async{t: t, s: s, b: b.echoBackend}
		a.send(context.Background(), batchReq(0, 1, 1))
		started(t, b.echoBackend)
		a.send(context.Background(), batchReq(1, 1, 1))
		started(t, b.echoBackend) // the first still holds the gate
		if got := b.instances(); len(got) != 2 || got[0] != 1 || got[1] != 1 {
			t.Fatalf("executions ran on instances %v, want [1 1]", got)
		}
		b.gate <- struct{}{}
		b.gate <- struct{}{}
		for i := range a.res {
			if r := a.wait(i); r.err != nil {
				t.Fatal(r.err)
			}
		}
	})
	t.Run("an idle instance is never passed over", func(t *testing.T) {
		s, b := pipeServer(t, 2)
		a := &async{t: t, s: s, b: b.echoBackend}
		for i := range 4 {
			a.send(context.Background(), batchReq(int32(i), 1, 1))
			started(t, b.echoBackend)
		}
		got := b.instances()
		if len(got) != 4 || got[0] == got[1] {
			t.Fatalf("executions ran on instances %v: the second request went to a busy instance while the other idled", got)
		}
		if got[2] == got[3] {
			t.Fatalf("executions ran on instances %v: one instance took two extra executions", got)
		}
		for range 4 {
			b.gate <- struct{}{}
		}
		for i := range a.res {
			if r := a.wait(i); r.err != nil {
				t.Fatal(r.err)
			}
		}
	})
}
