package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// barrierBackend records how many NewInstance calls run at once: each call
// waits (up to 10 s) for all expected calls to have arrived, so a backend
// whose instances are created one after another sees one at a time.
type barrierBackend struct {
	parallel bool
	want     int
	fail     map[string]error // instance name -> its load error

	mu      sync.Mutex
	arrived int
	running int
	most    int
	all     chan struct{}
	created []*barrierInstance
}

type barrierInstance struct {
	name   string
	closed bool
}

func (i *barrierInstance) Execute(context.Context, *Execution) error { return nil }
func (i *barrierInstance) Close() error                              { i.closed = true; return nil }

func (b *barrierBackend) Name() string { return "barrier" }
func (b *barrierBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *barrierBackend) ParallelInstances() bool { return b.parallel }

func (b *barrierBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	b.mu.Lock()
	b.arrived++
	b.running++
	b.most = max(b.most, b.running)
	if b.arrived == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(10 * time.Second):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	if err := b.fail[spec.Name]; err != nil {
		return nil, err
	}
	inst := &barrierInstance{name: spec.Name}
	b.created = append(b.created, inst)
	return inst, nil
}

// TestNewInstances: a backend that allows it gets all of a version's
// instances created at once, as Triton does for backends that set
// parallel instance loading; others get them one after another. Either
// way the instances come back in the config's order, and a failure closes
// the instances created and returns the first failure in that order.
func TestNewInstances(t *testing.T) {
	refs := []modelconfig.InstanceRef{{Name: "m_0"}, {Name: "m_1"}, {Name: "m_2"}, {Name: "m_3", Passive: true}}
	errTwo, errThree := errors.New("instance m_2 failed"), errors.New("instance m_3 failed")
	for _, c := range []struct {
		name     string
		parallel bool
		serial   bool // a retune's load
		fail     map[string]error
		most     int
		err      error
	}{
		{name: "parallel", parallel: true, most: 4},
		{name: "serial", parallel: false, most: 1},
		{name: "parallel backend, a retune", parallel: true, serial: true, most: 1},
		{name: "parallel, two fail", parallel: true, fail: map[string]error{"m_2": errTwo, "m_3": errThree}, most: 4, err: errTwo},
		{name: "serial, one fails", parallel: false, fail: map[string]error{"m_2": errTwo}, most: 1, err: errTwo},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &barrierBackend{parallel: c.parallel, want: len(refs), fail: c.fail, all: make(chan struct{})}
			if !c.parallel || c.serial {
				b.want = 1 // one call at a time: the first releases all
			}
			insts, starts, err := newInstances(context.Background(), b, refs, c.serial, func(ref modelconfig.InstanceRef) InstanceSpec {
				return InstanceSpec{Name: ref.Name}
			})
			if b.most != c.most {
				t.Errorf("%d instances created at once, want %d", b.most, c.most)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if c.err != nil {
				for _, inst := range b.created {
					if !inst.closed {
						t.Errorf("instance %s left open after the failure", inst.name)
					}
				}
				return
			}
			var names []string
			for _, inst := range insts {
				names = append(names, inst.(*barrierInstance).name)
			}
			if want := []string{"m_0", "m_1", "m_2", "m_3"}; !slices.Equal(names, want) {
				t.Errorf("instances %v, want %v", names, want)
			}
			for i, st := range starts {
				if st.Instance != refs[i].Name || st.Duration <= 0 {
					t.Errorf("start %d = %+v, want %s with a duration", i, st, refs[i].Name)
				}
			}
		})
	}
}
