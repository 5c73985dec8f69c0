package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/platforms/metrics"
)

// responseCacheConfig is the response cache the command line asks for
// (triton-inference-server/server src/command_line_parser.cc): one cache
// and its settings, or none.
type responseCacheConfig struct {
	name     string // "" when no cache is configured
	settings map[string]string
	dir      string // --cache-directory, named in the unknown-cache error
	// deprecated is Triton's warning for --response-cache-byte-size.
	deprecated string
}

// responseCacheSettings reads --cache-config, the deprecated
// --response-cache-byte-size and --cache-directory.
func responseCacheSettings(v *options.Values) (responseCacheConfig, error) {
	c := responseCacheConfig{dir: v.String("cache-directory")}
	list := v.List("cache-config")
	if v.Given("response-cache-byte-size") {
		if len(list) > 0 {
			//lint:ignore ST1005 Triton's exact wording.
			return c, errors.New("Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or the other.")
		}
		size := v.Int64("response-cache-byte-size")
		c.deprecated = fmt.Sprintf("'--response-cache-byte-size' has been deprecated! This will default to the 'local' cache implementation with the provided byte size for its config. Please use '--cache-config' instead. The equivalent --cache-config CLI args would be: '--cache-config=local,size=%d'", size)
		list = []string{"local,size=" + strconv.FormatInt(size, 10)}
	}
	caches := map[string]map[string]string{}
	for _, s := range list {
		name, key, value, err := options.Setting(s)
		if err != nil {
			return c, fmt.Errorf("--cache-config: %w", err)
		}
		if caches[name] == nil {
			caches[name] = map[string]string{}
		}
		caches[name][key] = value
	}
	if len(caches) > 1 {
		return c, errors.New("found multiple cache configurations, but only a single cache is currently supported")
	}
	for name, settings := range caches {
		c.name, c.settings = name, settings
	}
	return c, nil
}

// newResponseCache builds the configured cache (nil when none): a Redis
// that cannot be reached stops the start, as in Triton. The local cache
// also exports its own nv_cache_* gauges, as Triton's local cache does.
func newResponseCache(ctx context.Context, c responseCacheConfig, env environment, log *slog.Logger) (cache.Store, []prometheus.Collector, error) {
	if c.deprecated != "" {
		log.Warn(c.deprecated)
	}
	switch c.name {
	case "":
		return nil, nil, nil
	case "local":
		l, err := cache.NewLocal(c.settings)
		if err != nil {
			return nil, nil, err
		}
		log.Info(fmt.Sprintf("Response Cache is created with size %d", l.Size()))
		return l, []prometheus.Collector{metrics.LocalCacheCollector(l.Stats)}, nil
	case "redis":
		r, err := redisCache(ctx, c.settings, env, log.With("cache", "redis"))
		if err != nil {
			return nil, nil, err
		}
		return r, nil, nil
	}
	// Triton looks for the cache's library in the cache directory; inferd
	// has local and redis built in.
	return nil, nil, fmt.Errorf("unable to find 'libtritoncache_%s.so' for cache. Searched: %s (inferd has the caches local and redis built in)", c.name, c.dir)
}
