package core

// TeeObservers is an Observer that passes every call to a and then b
// (either may be nil): the metrics' observer and the autopilot's latency
// window see the same requests. ObserverAs finds either again.
func TeeObservers(a, b Observer) Observer {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return tee{a, b}
}

type tee [2]Observer

func (t tee) ObserveSuccess(d RequestDurations) {
	t[0].ObserveSuccess(d)
	t[1].ObserveSuccess(d)
}

func (t tee) ObserveFirstResponse(ms uint64) {
	t[0].ObserveFirstResponse(ms)
	t[1].ObserveFirstResponse(ms)
}

func (t tee) ObserveCacheHit(queueUs, lookupUs uint64) {
	for _, o := range t {
		if c, ok := o.(CacheObserver); ok {
			c.ObserveCacheHit(queueUs, lookupUs)
		}
	}
}

func (t tee) ObserveCacheMiss(us uint64) {
	for _, o := range t {
		if c, ok := o.(CacheObserver); ok {
			c.ObserveCacheMiss(us)
		}
	}
}

// ObserverAs is o, or the one of the observers o tees to, of type T.
func ObserverAs[T Observer](o Observer) (T, bool) {
	if v, ok := o.(T); ok {
		return v, true
	}
	if t, ok := o.(tee); ok {
		for _, m := range t {
			if v, ok := ObserverAs[T](m); ok {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}
