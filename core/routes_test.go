package core

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		taken  int // holds taken before retire
		given  int // of those, given back before retire
		shards int
	}{
		{"none", 0, 0, 1},
		{"all given back", 3, 3, 4},
		{"one still held", 3, 2, 4},
		{"many held, one shard", 5, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &holds{shards: make([]holdShard, tc.shards), mask: uint32(tc.shards - 1), drained: make(chan struct{})}
			h.releases = make([]func(), tc.shards)
			for i := range h.releases {
				h.shards[i].i = uint32(i)
				h.releases[i] = func() { h.release(uint32(i)) }
			}
			var releases []func()
			for range tc.taken {
				r, ok := h.acquire()
				if !ok {
					t.Fatal("acquire refused before retire")
				}
				releases = append(releases, r)
			}
			for _, r := range releases[:tc.given] {
				r()
			}
			retired := make(chan struct{})
			go func() { h.retire(); close(retired) }()
			for !h.retired.Load() {
				time.Sleep(time.Millisecond)
			}
			if _, ok := h.acquire(); ok {
				t.Error("acquire after retire was granted")
			}
			for _, r := range releases[tc.given:] {
				select {
				case <-retired:
					t.Fatal("retire returned while a hold was taken")
				case <-time.After(10 * time.Millisecond):
				}
				r()
			}
			select {
			case <-retired:
			case <-time.After(10 * time.Second):
				t.Fatalf("retire still waiting with %d holds", h.sum())
			}
		})
	}
}

// TestHoldsRace takes and gives back holds from many goroutines while
// the version retires: no hold may be granted once retire has returned.
func TestHoldsRace(t *testing.T) {
	h := newHolds()
	var closed atomic.Bool
	var late atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				release, ok := h.acquire()
				if !ok {
					continue
				}
				if closed.Load() {
					late.Add(1)
				}
				release()
				runtime.Gosched() // let retire and the test's own goroutine run
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	h.retire()
	closed.Store(true)
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := late.Load(); n != 0 {
		t.Fatalf("%d holds granted after retire returned", n)
	}
	if n := h.sum(); n != 0 {
		t.Fatalf("%d holds left", n)
	}
}

// reload changes m's config and loads it again: a new copy replaces the
// serving one (an unchanged model's load is a no-op).
func reload(t *testing.T, s *Server) {
	t.Helper()
	cfgPath := filepath.Join(s.opts.Repos.Sources[0].String(), "m", "config.pbtxt")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(cfg, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
}

// TestRoutesFollowTheRegistry: requests find the serving version through
// the route table once one was built; a load, an unload and a reload
// each drop it, and what Acquire answers afterwards is the registry's.
func TestRoutesFollowTheRegistry(t *testing.T) {
	s, b := gateServer(t)
	close(b.gate)
	acquire := func() (*ModelVersion, error) {
		mv, release, err := s.Acquire("m", LatestVersion)
		if err == nil {
			release()
		}
		return mv, err
	}
	first, err := acquire()
	if err != nil {
		t.Fatal(err)
	}
	if s.routes.Load() == nil {
		t.Fatal("no route table after a lookup")
	}
	if mv, release := s.route("m", 1, true); mv != first {
		t.Fatalf("route of version 1: %p, want %p", mv, first)
	} else {
		release()
	}
	if mv, _ := s.route("m", 2, true); mv != nil {
		t.Fatal("a route to a version that does not exist")
	}

	reload(t, s)
	if s.routes.Load() != nil {
		t.Fatal("route table kept across a reload")
	}
	second, err := acquire()
	if err != nil || second == first {
		t.Fatalf("after a reload: %p (first %p), %v", second, first, err)
	}
	waitRetired(t, first)

	if err := s.Unload(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(); CodeOf(err) != CodeNotFound {
		t.Fatalf("after the unload: %v, want NOT_FOUND", err)
	}
	if mv, _ := s.route("m", LatestVersion, true); mv != nil {
		t.Fatal("a route to an unloaded model")
	}
}

// TestRouteRetiredFallsBack: a table that still names a retired copy
// (read just before the change that replaced it) sends the request to the
// registry, which holds the serving copy.
func TestRouteRetiredFallsBack(t *testing.T) {
	s, b := gateServer(t)
	close(b.gate)
	mv, release, err := s.Acquire("m", LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	release()
	stale := s.routes.Load()
	reload(t, s)
	s.routes.Store(stale)
	waitRetired(t, mv)
	if got, _ := s.route("m", LatestVersion, true); got != nil {
		t.Fatal("a retired copy was routed to")
	}
	s.routes.Store(nil)
	got, release, err := s.Acquire("m", LatestVersion)
	if err != nil || got == mv {
		t.Fatalf("acquire after the reload: %p (retired %p), %v", got, mv, err)
	}
	release()
}

// waitRetired waits for the close of mv, a replaced copy, to retire it.
func waitRetired(t *testing.T, mv *ModelVersion) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !mv.holds.retired.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replaced copy was never retired")
		}
	}
}

// BenchmarkAcquire finds and holds the serving version from every
// processor, as each request does: through the route table and sharded
// holds, beside the registry's read lock and one shared counter (the
// lookup before). Compare the curves over -cpu:
//
//	go test ./core -run '^$' -bench BenchmarkAcquire -cpu 1,2,4,8,16
func BenchmarkAcquire(b *testing.B) {
	s, _, err := startEcho(b, "max_batch_size: 8\ninput [ { name: \"x\" data_type: TYPE_INT32 dims: [ 16 ] } ]\noutput [ { name: \"y\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n", true, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("routes", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, release, err := s.Acquire("m", LatestVersion)
				if err != nil {
					b.Error(err)
					return
				}
				release()
			}
		})
	})
	b.Run("read-lock", func(b *testing.B) {
		var inflight atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.mu.RLock()
				m := s.models["m"]
				var best int64 = -1
				for v, slot := range m.versions {
					if slot.state == StateReady && v > best {
						best = v
					}
				}
				inflight.Add(1)
				s.mu.RUnlock()
				inflight.Add(-1)
			}
		})
	})
}

// BenchmarkStatsRecord records one execution and one success from every
// processor, as each request does, into a sharded Stats and into one with
// a single shard (one lock, as before). Compare the curves over -cpu:
//
//	go test ./core -run '^$' -bench BenchmarkStatsRecord -cpu 1,2,4,8,16
func BenchmarkStatsRecord(b *testing.B) {
	t0 := time.Now()
	times := requestTimes{req: t0, queue: t0, exec: t0, cin: t0, cout: t0, execEnd: t0}
	for _, tc := range []struct {
		name  string
		stats *Stats
	}{{"sharded", newStats()}, {"one-lock", &Stats{}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tc.stats.recordExecution(1, 10, 20, 30)
					tc.stats.recordSuccess(times, t0, 1)
				}
			})
		})
	}
}

// TestWriteLocksDropRoutes reads the package's source: every method of
// Server that write-locks s.mu must release it through s.unlock, which
// drops the route table; one that called s.mu.Unlock itself would leave
// requests routed by a stale table after its change.
func TestWriteLocksDropRoutes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "routes.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List[0].Names) == 0 || types.ExprString(fd.Recv.List[0].Type) != "*Server" {
				continue
			}
			recv := fd.Recv.List[0].Names[0].Name
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch types.ExprString(call.Fun) {
				case recv + ".mu.Unlock":
					t.Errorf("%s: %s releases the registry's write lock without %s.unlock", fset.Position(call.Pos()), fd.Name.Name, recv)
				case recv + ".unlock":
					checked++
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("found %d calls of unlock: the check no longer sees the registry's write locks", checked)
	}
}
