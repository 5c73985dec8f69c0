package main

import (
	"strings"

	"github.com/inferd/inferd/cmd/inferd/options"
	"github.com/inferd/inferd/core/ratelimit"
)

// rateLimitConfig is --rate-limit and --rate-limit-resource.
type rateLimitConfig struct {
	// limiter is the core's rate limiter; nil for --rate-limit=off (the
	// default), which ignores every rate_limiter setting and any
	// --rate-limit-resource, as Triton does.
	limiter *ratelimit.Limiter
}

func rateLimitSettings(v *options.Values) (rateLimitConfig, error) {
	if !strings.EqualFold(v.String("rate-limit"), "execution_count") {
		return rateLimitConfig{}, nil
	}
	var resources []ratelimit.Resource
	for _, s := range v.List("rate-limit-resource") {
		name, count, device, err := options.RateLimitResource(s)
		if err != nil {
			return rateLimitConfig{}, err
		}
		resources = append(resources, ratelimit.Resource{Name: name, Count: count, Device: device})
	}
	return rateLimitConfig{limiter: ratelimit.New(resources)}, nil
}
