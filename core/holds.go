package core

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// holds counts the requests holding a model version, so that an unload or
// reload closes it only after them. Every request takes a hold and gives it
// back, so one counter shared by all of them is a cache line every core
// writes twice per request; the count is split over shards instead, and a
// request takes its hold in its processor's shard (as Stats.take) and
// gives it back there (BENCHMARKS.md, "Scaling with cores").
//
// Requests find the version without the registry's lock (routes.go), so a
// request may reach a version the registry has just let go of. retire
// settles the race: a request adds its hold, then looks whether the version
// is retired, and gives the hold back if it is; retire marks the version,
// then waits for the sum to reach zero. Go's atomics behave as if executed
// in one sequentially consistent order (go.dev/ref/mem, "Atomic Values"),
// so either the request sees the mark or retire sees its hold.
type holds struct {
	shards   []holdShard
	mask     uint32
	releases []func()      // releases[i] gives back a hold taken in shards[i]; made once
	pick     sync.Pool     // *holdShard: each processor's last
	next     atomic.Uint32 // the shard handed out when the pool has none
	retired  atomic.Bool
	once     sync.Once
	drained  chan struct{} // closed once retired and no hold is left
}

// holdShard is one shard's count, alone on its cache line.
type holdShard struct {
	n atomic.Int64
	i uint32 // its index in holds.shards
	_ [52]byte
}

// maxHoldShards bounds the shards of one version: retire sums them all.
const maxHoldShards = 32

func newHolds() *holds {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxHoldShards {
		n *= 2
	}
	h := &holds{shards: make([]holdShard, n), mask: uint32(n - 1), drained: make(chan struct{})}
	h.releases = make([]func(), n)
	for i := range h.releases {
		h.shards[i].i = uint32(i)
		h.releases[i] = func() { h.release(uint32(i)) }
	}
	return h
}

// acquire takes a hold and returns the function that gives it back, or
// false when the version is retired (nothing is held then).
func (h *holds) acquire() (release func(), ok bool) {
	var i uint32
	if h.mask != 0 {
		sh, ok := h.pick.Get().(*holdShard)
		if !ok {
			sh = &h.shards[h.next.Add(1)&h.mask]
		}
		h.pick.Put(sh)
		i = sh.i
	}
	h.shards[i].n.Add(1)
	if h.retired.Load() {
		h.release(i)
		return nil, false
	}
	return h.releases[i], true
}

// release gives back a hold taken in shard i; the last one after retire
// wakes it.
func (h *holds) release(i uint32) {
	h.shards[i].n.Add(-1)
	if h.retired.Load() && h.sum() == 0 {
		h.once.Do(func() { close(h.drained) })
	}
}

// sum is the holds now. Each shard counts only holds taken in it, so no
// shard is ever below zero; after retire, a sum of zero means no request
// holds the version (one that adds a hold later gives it back unused).
func (h *holds) sum() int64 {
	var n int64
	for i := range h.shards {
		n += h.shards[i].n.Load()
	}
	return n
}

// retire refuses new holds and waits until every hold is given back.
func (h *holds) retire() {
	h.retired.Store(true)
	if h.sum() == 0 {
		h.once.Do(func() { close(h.drained) })
	}
	<-h.drained
}
