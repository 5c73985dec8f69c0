//go:build !inferd_sagemaker && !inferd_vertex && !inferd_lambda

package main

import (
	"context"
	"log/slog"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/core/cache/redis"
)

// redisBuilt says the Redis response cache is built in (core/cache/redis,
// go-redis); the per-cloud builds leave it out (builds.go).
const redisBuilt = true

// redisCache connects to the --cache-config=redis,... cache.
func redisCache(ctx context.Context, settings map[string]string, env environment, log *slog.Logger) (cache.Store, error) {
	return redis.New(ctx, settings, env.get, log)
}
