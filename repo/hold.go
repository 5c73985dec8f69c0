package repo

import (
	"os"
	"sync"
)

// Holder is a Source whose local copies live only while they are used,
// as Triton's localized model folders do (triton-inference-server/core
// src/filesystem/api.cc: LocalizedPath's destructor deletes the copy):
// a load holds the model's copy from before it is fetched until the load
// ends, each version loaded from it holds it until the version closes, and
// the last release deletes the copy. A reload thus reuses the files that
// did not change, while an unloaded model, and at exit every model, leaves
// nothing behind.
type Holder interface {
	// Hold takes a reference to model's local copy; release drops it
	// (calling it again does nothing).
	Hold(model string) (release func())
}

var _ Holder = (*Remote)(nil)

// Hold implements Holder. The count shares the lock of sync, so a copy is
// never deleted while it is being fetched, and a hold taken before a fetch
// keeps what it fetches.
func (r *Remote) Hold(model string) (release func()) {
	r.mu.Lock()
	if r.holds == nil {
		r.holds = map[string]int{}
	}
	r.holds[model]++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.holds[model]--; r.holds[model] > 0 {
				return
			}
			delete(r.holds, model)
			dir, ok := r.localCopy(model)
			if !ok {
				return // never localized: sync refuses such names
			}
			if err := os.RemoveAll(dir); err != nil {
				r.log.Warn("failed to remove the local copy of a model", "model", model, "from", r.store.String(), "err", err)
				return
			}
			r.log.Debug("removed the local copy of a model no longer loaded", "model", model, "from", r.store.String())
		})
	}
}

// Hold forwards to the root once it opened; before that nothing was
// copied, so there is nothing to hold.
func (u *unreachable) Hold(model string) (release func()) {
	u.mu.Lock()
	src := u.src
	u.mu.Unlock()
	if h, ok := src.(Holder); ok {
		return h.Hold(model)
	}
	return func() {}
}
