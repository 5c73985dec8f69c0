package ratelimit

import (
	"testing"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
)

// group is a model config whose instance groups need the given global R
// counts at the given priorities, one instance each.
func group(t *testing.T, needs ...[2]uint32) (*modelconfig.ModelConfig, []modelconfig.InstanceRef) {
	t.Helper()
	cfg := &modelconfig.ModelConfig{Name: "m"}
	var refs []modelconfig.InstanceRef
	for i, n := range needs {
		cfg.InstanceGroup = append(cfg.InstanceGroup, &modelconfig.ModelInstanceGroup{
			RateLimiter: &modelconfig.ModelRateLimiter{Priority: n[1],
				Resources: []*modelconfig.ModelRateLimiter_Resource{{Name: "R", Global: true, Count: n[0]}}},
		})
		refs = append(refs, modelconfig.InstanceRef{GroupIndex: i})
	}
	return cfg, refs
}

// granted reports whether acquire returns within d.
func granted(acquire func() time.Time, d time.Duration) (<-chan time.Time, bool) {
	ch := make(chan time.Time, 1)
	go func() { ch <- acquire() }()
	select {
	case at := <-ch:
		ch <- at
		return ch, true
	case <-time.After(d):
		return ch, false
	}
}

// Two instances that each need the one R take turns; the one waiting gets
// it when the other releases, and a nil limiter never waits.
func TestSlotsTakeTurns(t *testing.T) {
	rl := New([]Resource{{Name: "R", Count: 1, Device: -1}})
	cfg, refs := group(t, [2]uint32{1, 1}, [2]uint32{1, 1})
	slots, err := rl.Register(cfg, refs)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := granted(slots.At(0).Acquire, time.Second); !ok {
		t.Fatal("the first instance waits with R free")
	}
	second, ok := granted(slots.At(1).Acquire, 100*time.Millisecond)
	if ok {
		t.Fatal("the second instance runs while the first holds R")
	}
	if rl.Waiting() != 1 {
		t.Fatalf("waiting %d, want 1", rl.Waiting())
	}
	slots.At(0).Release(false)
	select {
	case at := <-second:
		if at.IsZero() {
			t.Fatal("granted without a time")
		}
	case <-time.After(time.Second):
		t.Fatal("the second instance still waits after the release")
	}
	slots.At(1).Release(false)
	slots.Unregister()
	if rl.Instances() != 0 {
		t.Fatalf("%d instances after Unregister", rl.Instances())
	}
	var off *Limiter
	offSlots, err := off.Register(cfg, refs)
	if err != nil || offSlots.At(0) != nil {
		t.Fatalf("a nil limiter registers %v, %v", offSlots, err)
	}
	if at := offSlots.At(0).Acquire(); !at.IsZero() {
		t.Fatal("a nil slot reports a grant time")
	}
}

// An instance that needs more than --rate-limit-resource gives is refused
// in Triton's words, and registers nothing.
func TestRegisterRefusesTooFew(t *testing.T) {
	rl := New([]Resource{{Name: "R", Count: 1, Device: -1}})
	cfg, refs := group(t, [2]uint32{2, 1})
	if _, err := rl.Register(cfg, refs); err == nil || err.Error() != `Resource count for "R" is limited to 1 which will prevent scheduling of one or more model instances, the minimum required count is 2` {
		t.Fatalf("err = %v", err)
	}
	if rl.Instances() != 0 {
		t.Fatalf("%d instances registered", rl.Instances())
	}
}
