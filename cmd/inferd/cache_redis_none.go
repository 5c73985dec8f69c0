//go:build inferd_sagemaker || inferd_vertex || inferd_lambda

package main

import (
	"context"
	"log/slog"

	"github.com/inferd/inferd/core/cache"
)

// redisBuilt: see cache_redis.go.
const redisBuilt = false

// redisCache is never reached: checkBuild refuses the setting first.
func redisCache(context.Context, map[string]string, environment, *slog.Logger) (cache.Store, error) {
	return nil, notInBuild("--cache-config=redis asks for the Redis response cache, which")
}
