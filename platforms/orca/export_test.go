package orca

// KVCacheOff makes the Reporter of opts read the KV-cache family for every
// report, for tests that change it between requests and compare exactly.
func KVCacheOff(opts Options) Options {
	opts.kvCache = -1
	return opts
}
