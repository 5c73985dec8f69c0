package core

// The registry's lookup of serving versions without its lock. Every
// request used to read-lock Server.mu to find its version: a
// sync.RWMutex's read lock is an atomic add on one counter that every
// request of every model writes, twice, which is what stops a read-mostly
// lock from scaling with cores (golang/go issue 17973, "sync: RWMutex
// scales poorly with CPU count"; BENCHMARKS.md, "Scaling with cores").
// Requests now read a routeTable through an atomic pointer: a copy of what
// Acquire would find, built under the read lock by the first request after
// a change and dropped by every change (Server.unlock: every write lock of
// s.mu ends there, which TestWriteLocksDropRoutes checks), so the table a
// request reads is either current or from just before the change, as if
// the request had come a moment earlier. A version the change let go of is
// retired before it closes (holds), and a request that reaches it then
// looks again under the lock.

// routeTable maps registry keys to their serving versions.
type routeTable struct {
	models map[string]*route
	// names maps a request's model name to its registry key under
	// --model-namespacing, for names with exactly one identity.
	names map[string]string
}

// route is one model's READY versions.
type route struct {
	latest   *ModelVersion // the highest READY version, if it serves
	versions map[int64]*ModelVersion
}

// find is the version (key, version) routes to, or nil.
func (t *routeTable) find(key string, version int64) *ModelVersion {
	r := t.models[key]
	switch {
	case r == nil:
		return nil
	case version == LatestVersion:
		return r.latest
	}
	return r.versions[version]
}

// routesLocked builds the table from the registry; s.mu must be held (for
// reading is enough).
func (s *Server) routesLocked() *routeTable {
	t := &routeTable{models: make(map[string]*route, len(s.models))}
	for key, m := range s.models {
		var r *route
		best := int64(-1)
		for v, slot := range m.versions {
			if slot.state != StateReady {
				continue
			}
			if v > best {
				best = v
			}
			if slot.mv == nil {
				continue
			}
			if r == nil {
				r = &route{versions: map[int64]*ModelVersion{}}
			}
			r.versions[v] = slot.mv
		}
		if r != nil {
			r.latest = r.versions[best] // nil when the best READY slot has no copy: Acquire says why
			t.models[key] = r
		}
	}
	if s.opts.Namespacing {
		t.names = map[string]string{}
		for name, keys := range s.global {
			if len(keys) == 1 {
				for k := range keys {
					t.names[name] = k
				}
			}
		}
	}
	return t
}

// route holds the version (key, version) routes to without taking s.mu,
// or returns nil when the table is not built, does not have it, or the
// version was retired meanwhile: the caller looks under the lock. With
// byName, key is a request's model name, resolved as resolve does.
func (s *Server) route(key string, version int64, byName bool) (*ModelVersion, func()) {
	t := s.routes.Load()
	if t == nil {
		return nil, nil
	}
	if byName && s.opts.Namespacing {
		k, ok := t.names[key]
		if !ok {
			return nil, nil
		}
		key = k
	}
	mv := t.find(key, version)
	if mv == nil {
		return nil, nil
	}
	release, ok := mv.holds.acquire()
	if !ok {
		return nil, nil
	}
	return mv, release
}

// unlock drops the route table, then releases s.mu from writing: every
// change of the registry ends here.
func (s *Server) unlock() {
	s.routes.Store(nil)
	s.mu.Unlock()
}
