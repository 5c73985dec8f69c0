// Package cache holds the response cache stores: a byte-bounded local LRU
// here and Redis in cache/redis. A store keeps opaque entries by key; the
// core computes the keys and encodes the responses
// (triton-inference-server/server docs/user_guide/response_cache.md).
package cache

import (
	"context"
	"errors"
)

// Store is one response cache implementation. Lookup and Insert are called
// on the request path, so an implementation answers quickly: a store that
// cannot be reached reports a miss (and Insert nil) rather than an error
// that would fail the request.
type Store interface {
	// Lookup returns the entry under key and whether there was one.
	Lookup(ctx context.Context, key string) ([]byte, bool)
	// Insert stores entry under key: ErrExists when the key is already
	// held, ErrTooLarge when the entry can never fit.
	Insert(ctx context.Context, key string, entry []byte) error
	// Close releases the store's resources.
	Close() error
}

// ErrExists reports an Insert of a key the store already holds: the request
// was a hit for another request that ran at the same time, not a miss.
var ErrExists = errors.New("key already exists")

// ErrTooLarge reports an entry larger than the whole cache.
var ErrTooLarge = errors.New("entry is larger than the cache")
