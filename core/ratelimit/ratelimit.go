// Package ratelimit is Triton's execution_count rate limiter: resources per
// device or global, instance priorities, and the staging order of instances
// waiting for their resources (triton-inference-server/core
// src/rate_limiter.cc). The schedulers hold one Slot per active instance
// and Acquire it before each execution.
package ratelimit

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/inferd/inferd/core/status"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Resource is one --rate-limit-resource: how many of a resource
// there are on one device, or on every device when Device < 0. For a
// resource the models declare global the device is ignored.
type Resource struct {
	Name   string
	Count  uint64
	Device int
}

// Keys of a resourceMap besides device ids, as in
// triton-inference-server/core src/rate_limiter.h.
const (
	globalKey   = -2 // a global resource: one pool for the whole server
	everyDevice = -1 // an explicit count that applies to every device
)

// resourceMap counts resources by device (or globalKey) and name.
type resourceMap map[int]map[string]uint64

func (m resourceMap) set(key int, name string, n uint64) {
	if m[key] == nil {
		m[key] = map[string]uint64{}
	}
	m[key][name] = n
}

// Limiter is Triton's execution_count rate limiter
// (triton-inference-server/server docs/user_guide/rate_limiter.md, core
// src/rate_limiter.cc), shared by every model of a server. An instance
// with a batch to run is staged; the staged instance with the lowest
// executions × priority runs once the resources its rate_limiter lists
// are free, and holds them until its execution returns. Only that head is
// tried: while its resources are taken, the instances behind it wait too.
//
// The available count of a resource is the most any loaded instance needs
// (per device, or server-wide for a global one) unless --rate-limit-resource
// gives it; once any count is given, resources it does not give have none.
// A nil *Limiter is --rate-limit=off: instances run as soon as they
// have work and their rate_limiter settings are ignored.
type Limiter struct {
	explicit resourceMap // empty: counts default to the most needed

	mu     sync.Mutex
	slots  map[*Slot]struct{} // the registered instances
	avail  resourceMap
	used   resourceMap
	staged []*Slot
	stamp  uint64 // staging order: breaks ties between equal priorities
}

// New returns the execution_count rate limiter with the given
// explicit resource counts. A resource given twice for the same device
// keeps the smaller count, as Triton's server options do.
func New(resources []Resource) *Limiter {
	rl := &Limiter{explicit: resourceMap{}, slots: map[*Slot]struct{}{}, avail: resourceMap{}, used: resourceMap{}}
	for _, r := range resources {
		key := r.Device
		if key < 0 {
			key = everyDevice
		}
		if n, ok := rl.explicit[key][r.Name]; ok && n <= r.Count {
			continue
		}
		rl.explicit.set(key, r.Name, r.Count)
	}
	return rl
}

// Slot is one instance's place in the rate limiter. A scheduler
// worker calls acquire before each execution and release after it; each
// instance has one worker, so a slot is never staged twice.
type Slot struct {
	rl       *Limiter
	need     resourceMap
	priority uint64
	grant    chan struct{} // receives once the slot is allocated

	// Under rl.mu:
	count  uint64 // executions finished
	staged bool   // waiting in rl.staged
	ahead  bool   // release staged it for the next acquire
	stamp  uint64
}

// Slots are a version's active instances' slots, in instance order;
// nil when rate limiting is off.
type Slots []*Slot

// At returns instance i's slot, nil when rate limiting is off.
func (l Slots) At(i int) *Slot {
	if l == nil {
		return nil
	}
	return l[i]
}

// Register adds a version's active instances (refs, in order) with the
// resources and priority of their instance groups. It refuses, in
// Triton's words, instances that need more of a resource than
// --rate-limit-resource gives, and a resource that is global for one
// instance and per-device for another.
func (rl *Limiter) Register(cfg *modelconfig.ModelConfig, refs []modelconfig.InstanceRef) (Slots, error) {
	if rl == nil {
		return nil, nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	slots := make(Slots, 0, len(refs))
	for _, ref := range refs {
		rc := cfg.GetInstanceGroup()[ref.GroupIndex].GetRateLimiter()
		t := &Slot{rl: rl, need: resourceMap{}, priority: max(1, uint64(rc.GetPriority())), grant: make(chan struct{}, 1)}
		for _, r := range rc.GetResources() {
			key := int(ref.DeviceID)
			if r.GetGlobal() {
				key = globalKey
			}
			t.need.set(key, r.GetName(), uint64(r.GetCount()))
		}
		// Checked instance by instance, as Triton registers them, so the
		// first instance that cannot be served names the error.
		rl.slots[t] = struct{}{}
		slots = append(slots, t)
		if err := rl.recompute(); err != nil {
			for _, s := range slots {
				delete(rl.slots, s)
			}
			_ = rl.recompute() // the counts before this version, which held
			return nil, err
		}
	}
	rl.allocate()
	return slots, nil
}

// Unregister removes a closed version's slots; the counts that defaulted
// to their needs go down again.
func (l Slots) Unregister() {
	if len(l) == 0 {
		return
	}
	rl := l[0].rl
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for _, t := range l {
		delete(rl.slots, t)
		if t.staged {
			rl.staged = slices.DeleteFunc(rl.staged, func(s *Slot) bool { return s == t })
		}
	}
	_ = rl.recompute() // removing instances cannot make the counts invalid
	rl.allocate()
}

// recompute sets the available counts from the registered instances'
// needs and the explicit counts, checked as
// triton-inference-server/core src/rate_limiter.cc ResourceManager does.
// Under rl.mu.
func (rl *Limiter) recompute() error {
	most := resourceMap{}
	for t := range rl.slots {
		for key, names := range t.need {
			for name, n := range names {
				if n >= most[key][name] {
					most.set(key, name, n)
				}
			}
		}
	}
	avail := resourceMap{}
	for _, key := range slices.Sorted(maps.Keys(most)) {
		for _, name := range slices.Sorted(maps.Keys(most[key])) {
			need := most[key][name]
			n := need
			if len(rl.explicit) > 0 {
				n = rl.explicitCount(key, name)
				if n < need {
					return status.Errorf(status.CodeInvalidArg, "Resource count for \"%s\" is limited to %d which will prevent scheduling of one or more model instances, the minimum required count is %d", name, n, need)
				}
			}
			avail.set(key, name, n)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(most[globalKey])) {
		for _, key := range slices.Sorted(maps.Keys(most)) {
			if _, ok := most[key][name]; ok && key != globalKey {
				return status.Errorf(status.CodeInvalidArg, "Resource \"%s\" is present as both global and device-specific resource in the model configuration.", name)
			}
		}
	}
	rl.avail = avail
	return nil
}

// explicitCount is the given count of a resource: for a global one the
// largest given on any device, else the largest given for its device or
// for every device; 0 when none is given.
func (rl *Limiter) explicitCount(key int, name string) uint64 {
	var n uint64
	for dev, names := range rl.explicit {
		if c, ok := names[name]; ok && (key == globalKey || dev == key || dev == everyDevice) {
			n = max(n, c)
		}
	}
	return n
}

// Acquire blocks until the slot may run an execution: it stages the slot
// (unless Release staged it already) and waits for its resources. It
// returns when they were granted (zero with rate limiting off): the
// requests' queue time runs until then, as Triton counts the wait for
// resources as queue time (its requests leave the queue when their
// execution starts).
func (t *Slot) Acquire() (granted time.Time) {
	if t == nil {
		return time.Time{}
	}
	rl := t.rl
	rl.mu.Lock()
	if !t.ahead {
		rl.stage(t)
		rl.allocate()
	}
	t.ahead = false
	rl.mu.Unlock()
	<-t.grant
	return time.Now()
}

// Release frees the slot's resources after an execution and counts it.
// With again set, the worker already holds its next batch: the slot is
// staged at once, as Triton stages a released instance that has pending
// work before it hands the resources on, so that it competes by priority
// with the instances already waiting.
func (t *Slot) Release(again bool) {
	if t == nil {
		return
	}
	rl := t.rl
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for key, names := range t.need {
		for name, n := range names {
			rl.used[key][name] -= n
		}
	}
	t.count++
	if again {
		rl.stage(t)
		t.ahead = true
	}
	rl.allocate()
}

// stage queues t for allocation. Under rl.mu.
func (rl *Limiter) stage(t *Slot) {
	rl.stamp++
	t.staged, t.stamp = true, rl.stamp
	rl.staged = append(rl.staged, t)
}

// allocate runs staged instances in priority order while the head's
// resources are free. Triton allocates one instance per staging or
// release; allocating until the head does not fit also runs instances
// that a release of several resources freed room for at once. Under rl.mu.
func (rl *Limiter) allocate() {
	for len(rl.staged) > 0 {
		i := 0
		for k, t := range rl.staged[1:] {
			if before(t, rl.staged[i]) {
				i = k + 1
			}
		}
		head := rl.staged[i]
		if !rl.fits(head) {
			return
		}
		for key, names := range head.need {
			for name, n := range names {
				rl.used.set(key, name, rl.used[key][name]+n)
			}
		}
		rl.staged = slices.Delete(rl.staged, i, i+1)
		head.staged = false
		head.grant <- struct{}{}
	}
}

// before orders staged slots: fewer executions × priority first (Triton's
// ScaledPriority), then the earlier staged.
func before(a, b *Slot) bool {
	if c := cmp.Compare(a.count*a.priority, b.count*b.priority); c != 0 {
		return c < 0
	}
	return a.stamp < b.stamp
}

// fits reports whether t's resources are free. Under rl.mu.
func (rl *Limiter) fits(t *Slot) bool {
	for key, names := range t.need {
		for name, n := range names {
			if rl.used[key][name]+n > rl.avail[key][name] {
				return false
			}
		}
	}
	return true
}

// Waiting is how many instances wait for resources now.
func (rl *Limiter) Waiting() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.staged)
}

// GlobalDevice is the device key of global resources in Available.
const GlobalDevice = globalKey

// Available is a copy of the resource counts the limiter hands out, by
// device (GlobalDevice for global resources) and name.
func (rl *Limiter) Available() map[int]map[string]uint64 {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	out := make(map[int]map[string]uint64, len(rl.avail))
	for key, names := range rl.avail {
		out[key] = maps.Clone(names)
	}
	return out
}

// Instances is how many instances are registered.
func (rl *Limiter) Instances() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.slots)
}
