// Package serve is the process plumbing shared by every frontend: a run
// group of long-lived actors and HTTP listeners with a graceful drain.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Actor is one long-lived part of the process: Run blocks until it stops;
// Stop asks it to stop, draining work for at most the context's time.
type Actor struct {
	Name string
	Run  func() error
	Stop func(ctx context.Context)
}

// Group runs actors until the first one returns or ctx is cancelled, then
// stops them all (in reverse order) within drain. It returns the first
// actor error, or nil when the stop came from ctx.
func Group(ctx context.Context, drain time.Duration, actors ...Actor) error {
	errc := make(chan error, len(actors))
	for _, a := range actors {
		go func() { errc <- a.Run() }()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
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
