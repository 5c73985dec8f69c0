package main

import (
	"strings"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/core"
)

// rateLimitConfig is --rate-limit and --rate-limit-resource.
type rateLimitConfig struct {
	// limiter is the core's rate limiter; nil for --rate-limit=off (the
	// default), which ignores every rate_limiter setting and any
	// --rate-limit-resource, as Triton does.
	limiter *core.RateLimiter
}

func rateLimitSettings(v *options.Values) (rateLimitConfig, error) {
	if !strings.EqualFold(v.String("rate-limit"), "execution_count") {
		return rateLimitConfig{}, nil
	}
	var resources []core.RateLimitResource
	for _, s := range v.List("rate-limit-resource") {
		name, count, device, err := options.RateLimitResource(s)
		if err != nil {
			return rateLimitConfig{}, err
		}
		resources = append(resources, core.RateLimitResource{Name: name, Count: count, Device: device})
	}
	return rateLimitConfig{limiter: core.NewRateLimiter(resources)}, nil
}
