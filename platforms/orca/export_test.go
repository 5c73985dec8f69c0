package orca

import "time"

// KVCacheOff makes the Reporter of opts read the KV-cache family for every
// report, for tests that change it between requests and compare exactly.
func KVCacheOff(opts Options) Options {
	opts.kvCache = -1
	return opts
}

// CallCache sets how long the Reporter of opts reuses a model's trailer
// (below 0: never).
func CallCache(d time.Duration) func(Options) Options {
	return func(opts Options) Options {
		opts.callCache = d
		return opts
	}
}
