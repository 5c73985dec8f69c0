package grpcapi

import (
	"context"
	"sync"

	"google.golang.org/grpc/peer"

	"github.com/inferd/inferd/platforms/serve"
)

// connBudgets holds one serve.Budget per client connection with open
// streams, so that the decoupled responses all of a connection's streams
// hold unread stay under one bound (grpc-go lets a connection open any
// number of streams, each with its own outbox's bounds).
type connBudgets struct {
	max int64
	mu  sync.Mutex
	m   map[string]*connBudget
}

type connBudget struct {
	budget  *serve.Budget
	streams int
}

// acquire returns the budget of the connection ctx's stream came on, and
// the release its stream calls when it ends; a nil budget when the
// connection cannot be told (no peer in ctx).
func (c *connBudgets) acquire(ctx context.Context) (*serve.Budget, func()) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil, func() {}
	}
	// A TCP connection is its two ends.
	key := p.Addr.Network() + " " + p.Addr.String()
	if p.LocalAddr != nil {
		key += " " + p.LocalAddr.String()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*connBudget{}
	}
	b := c.m[key]
	if b == nil {
		b = &connBudget{budget: serve.NewBudget(c.max)}
		c.m[key] = b
	}
	b.streams++
	return b.budget, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if b.streams--; b.streams == 0 {
			delete(c.m, key)
		}
	}
}
