package cache

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Local is Triton's local cache (triton-inference-server/local_cache): an
// in-memory cache bounded by bytes that evicts the least recently used
// entries to make room for a new one.
type Local struct {
	mu      sync.Mutex
	size    uint64 // capacity in bytes
	used    uint64
	entries map[string]*list.Element
	lru     *list.List // front: most recently used; values are *localEntry
	stats   LocalStats
}

type localEntry struct {
	key  string
	data []byte
}

// LocalStats are the local cache's own counters, as the local cache
// exports them (nv_cache_num_entries, nv_cache_util, ...).
type LocalStats struct {
	Entries, Hits, Misses, Lookups, Evictions uint64
	// Util is the fraction of the capacity in use, 0 to 1.
	Util float64
	// LookupUs and InsertUs are the total lookup and insertion durations
	// in microseconds.
	LookupUs, InsertUs uint64
}

// NewLocal builds a local cache from its --cache-config=local,<key>=<value>
// settings: size (bytes) is required.
func NewLocal(settings map[string]string) (*Local, error) {
	v, ok := settings["size"]
	if !ok {
		//lint:ignore ST1005 Triton's exact wording.
		return nil, fmt.Errorf("Failed to initialize LocalCache: config didn't contain a valid 'size' field.")
	}
	size, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		//lint:ignore ST1005 Triton's exact wording.
		return nil, fmt.Errorf("Failed to initialize LocalCache: 'size' config must be a string or uint type")
	}
	for k := range settings {
		if k != "size" {
			//lint:ignore ST1005 Triton's words.
			return nil, fmt.Errorf("Failed to initialize LocalCache: unknown setting %q (the local cache takes only 'size')", k)
		}
	}
	return NewLocalSize(size), nil
}

// NewLocalSize is a local cache of size bytes.
func NewLocalSize(size uint64) *Local {
	return &Local{size: size, entries: map[string]*list.Element{}, lru: list.New()}
}

// Size is the capacity in bytes.
func (c *Local) Size() uint64 { return c.size }

// Lookup implements Store.
func (c *Local) Lookup(_ context.Context, key string) ([]byte, bool) {
	start := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.stats.LookupUs += uint64(time.Since(start).Microseconds()) }()
	c.stats.Lookups++
	el, ok := c.entries[key]
	if !ok {
		c.stats.Misses++
		return nil, false
	}
	c.stats.Hits++
	c.lru.MoveToFront(el)
	return el.Value.(*localEntry).data, true
}

// Insert implements Store. The entry is kept as given: callers hand over
// a slice they no longer change.
func (c *Local) Insert(_ context.Context, key string, entry []byte) error {
	start := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.stats.InsertUs += uint64(time.Since(start).Microseconds()) }()
	if _, ok := c.entries[key]; ok {
		return fmt.Errorf("key '%s' already exists: %w", key, ErrExists)
	}
	n := uint64(len(entry))
	if n > c.size {
		//lint:ignore ST1005 Triton's exact wording.
		return fmt.Errorf("Requested byte_size: %d is greater than total cache size: %d: %w", n, c.size, ErrTooLarge)
	}
	for c.used+n > c.size {
		c.evictOldest()
	}
	c.entries[key] = c.lru.PushFront(&localEntry{key: key, data: entry})
	c.used += n
	return nil
}

// evictOldest drops the least recently used entry (under mu).
func (c *Local) evictOldest() {
	el := c.lru.Back()
	e := el.Value.(*localEntry)
	c.lru.Remove(el)
	delete(c.entries, e.key)
	c.used -= uint64(len(e.data))
	c.stats.Evictions++
}

// Stats returns the cache's counters now.
func (c *Local) Stats() LocalStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = uint64(len(c.entries))
	if c.size > 0 {
		s.Util = float64(c.used) / float64(c.size)
	}
	return s
}

// Close implements Store.
func (c *Local) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*list.Element{}
	c.lru.Init()
	c.used = 0
	return nil
}
