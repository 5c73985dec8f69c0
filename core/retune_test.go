package core

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/repo/modelconfig"
)

// TestRetune: a retune reloads the model with the config given, beside
// the copy serving; the files' fingerprint is kept, so a plain load of
// the unchanged model is a no-op that does not undo it; a failed retune
// leaves the copy serving and the fingerprints; a retune of a
// copy that no longer serves (replaced, or unloaded) is refused and loads
// nothing.
func TestRetune(t *testing.T) {
	s, _, err := startEcho(t, `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`, true, nil)
	must(t, err)
	ctx := context.Background()
	first := served(t, s)
	fp := s.loadedFingerprint("m")
	if fp == "" {
		t.Fatal("no fingerprint after the first load")
	}
	cfg := proto.Clone(first.Config).(*modelconfig.ModelConfig)
	cfg.InstanceGroup[0].Count = 2
	must(t, s.Retune(ctx, first, cfg))
	second := served(t, s)
	if second == first || second.Config.GetInstanceGroup()[0].GetCount() != 2 {
		t.Fatalf("after the retune: same copy %v, count %d", second == first, second.Config.GetInstanceGroup()[0].GetCount())
	}
	if s.loadedFingerprint("m") != fp || s.attempted("m") != fp {
		t.Fatalf("fingerprints %q %q after the retune, want %q kept", s.loadedFingerprint("m"), s.attempted("m"), fp)
	}
	// A retune that fails leaves the copy serving and the fingerprints.
	bad := proto.Clone(cfg).(*modelconfig.ModelConfig)
	bad.Backend = "nonexistent"
	if err := s.Retune(ctx, second, bad); err == nil {
		t.Fatal("a retune to a backend the server lacks loaded")
	}
	if served(t, s) != second || s.loadedFingerprint("m") != fp || s.attempted("m") != fp {
		t.Fatalf("after a failed retune: same copy %v, fingerprints %q %q", served(t, s) == second, s.loadedFingerprint("m"), s.attempted("m"))
	}
	must(t, s.Load(ctx, "m", nil))
	if served(t, s) != second {
		t.Fatal("a plain load of the unchanged model reloaded it")
	}
	if err := s.Retune(ctx, first, cfg); !errors.Is(err, ErrRetuneStale) {
		t.Fatalf("retune of the replaced copy: %v", err)
	}
	must(t, s.Unload(ctx, "m"))
	if err := s.Retune(ctx, second, cfg); !errors.Is(err, ErrRetuneStale) {
		t.Fatalf("retune after the unload: %v", err)
	}
	if s.ModelReady("m", LatestVersion) {
		t.Fatal("a retune brought back an unloaded model")
	}
}

func served(t *testing.T, s *Server) *ModelVersion {
	t.Helper()
	mv, release, err := s.Acquire("m", LatestVersion)
	must(t, err)
	release()
	return mv
}

// TestRetuneCreatesInstancesOneAtATime: a user's reload creates the
// instances of a backend that allows it at once; a retune, whose replaced
// copy serves meanwhile, one after another (newInstances).
func TestRetuneCreatesInstancesOneAtATime(t *testing.T) {
	s, b, err := startEcho(t, `input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`, true, nil)
	must(t, err)
	ctx := context.Background()
	b.parallel.Store(true)
	cfg := proto.Clone(served(t, s).Config).(*modelconfig.ModelConfig)
	cfg.InstanceGroup[0].Count = 3
	js, err := modelconfig.MarshalJSON(cfg)
	must(t, err)
	b.gather.Store(3)
	must(t, s.Load(ctx, "m", &LoadOverride{ConfigJSON: string(js)}))
	if n := b.mostCreating.Swap(0); n != 3 {
		t.Errorf("a user's reload created %d instances at once, want 3", n)
	}
	b.gather.Store(0) // each creation lasts createFor: created at once, they would overlap
	cfg.InstanceGroup[0].Count = 2
	must(t, s.Retune(ctx, served(t, s), cfg))
	if n := b.mostCreating.Load(); n != 1 {
		t.Errorf("a retune created %d instances at once, want 1", n)
	}
	if got := served(t, s).Config.GetInstanceGroup()[0].GetCount(); got != 2 {
		t.Errorf("after the retune: %d instances, want 2", got)
	}
}
