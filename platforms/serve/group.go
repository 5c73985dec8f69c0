// Package serve is the process plumbing shared by every frontend: a run
// group of long-lived actors and HTTP listeners with a graceful drain.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Actor is one long-lived part of the process: Run blocks until it stops;
// Stop asks it to stop, draining work for at most the context's time.
type Actor struct {
	Name string
	Run  func() error
	Stop func(ctx context.Context)
}

// Deadline is a process's one exit deadline (--exit-timeout-secs): its
// clock starts when the stop begins, the first time Context is called, and
// every step of the stop (listener drains, model unloads, worker
// finalizes, trace flushes) shares it rather than each taking the whole
// timeout again.
type Deadline struct {
	timeout time.Duration
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
}

// NewDeadline returns a deadline of timeout, not yet started.
func NewDeadline(timeout time.Duration) *Deadline { return &Deadline{timeout: timeout} }

// Context starts the deadline's clock on the first call and returns the
// context that ends when it passes; later calls return the same context.
func (d *Deadline) Context() context.Context {
	d.once.Do(func() { d.ctx, d.cancel = context.WithTimeout(context.Background(), d.timeout) })
	return d.ctx
}

// Release ends the deadline once the stop is over, freeing its timer:
// its context is done from then on.
func (d *Deadline) Release() {
	d.Context()
	d.cancel()
}

// Group runs actors until the first one returns or ctx is cancelled, then
// starts stop's clock and stops them all (in reverse order) within it. It
// returns the first actor error, or nil when the stop came from ctx.
func Group(ctx context.Context, stop *Deadline, actors ...Actor) error {
	errc := make(chan error, len(actors))
	for _, a := range actors {
		go func() { errc <- a.Run() }()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	stopCtx := stop.Context()
	for i := len(actors) - 1; i >= 0; i-- {
		actors[i].Stop(stopCtx)
	}
	return first
}

// HTTP returns an Actor serving srv on ln. Stopping it closes the listener
// and waits for in-flight requests until the drain deadline.
func HTTP(name string, ln net.Listener, srv *http.Server) Actor {
	return Actor{
		Name: name,
		Run: func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
		Stop: func(ctx context.Context) {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
		},
	}
}
