// Package serve is the process plumbing shared by every frontend: a run
// group of long-lived actors and HTTP listeners with a graceful drain.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Actor is one long-lived part of the process: Run blocks until it stops;
// Stop asks it to stop and returns once it has, draining work for at most
// the context's time. A Stop error makes the process's exit a failure.
type Actor struct {
	Name string
	Run  func() error
	Stop func(ctx context.Context) error
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

// Group is a process's run group, in the manner of oklog/run as
// Prometheus' cmd/prometheus/main.go uses it: each actor runs from the
// moment it is added, so a process that starts in steps (a listener bound
// before the models load, the others after) adds its actors as it goes,
// and the first actor to return, or the end of the parent context, stops
// them all, the last added first. Go, Wait and Stop belong to the one
// goroutine that builds the process.
type Group struct {
	stop   *Deadline
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelCauseFunc
	actors []Actor
}

// actorReturn is the cause of a group's end when an actor returned.
type actorReturn struct{ err error }

func (r *actorReturn) Error() string { return "an actor returned" }

// NewGroup returns an empty group whose stop runs within stop, and the
// group's context: it ends with ctx or as soon as an actor returns, so
// the start-up steps between two actors (loading the models) give up when
// an actor already running fails. log, when not nil, gets a debug line
// per actor stopped.
func NewGroup(ctx context.Context, stop *Deadline, log *slog.Logger) (*Group, context.Context) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return &Group{stop: stop, log: log, ctx: ctx, cancel: cancel}, ctx
}

// Go starts a's Run and adds a to the actors the group stops.
func (g *Group) Go(a Actor) {
	g.actors = append(g.actors, a)
	go func() {
		err := a.Run()
		if err != nil {
			err = fmt.Errorf("%s: %w", a.Name, err)
		}
		g.cancel(&actorReturn{err})
	}()
}

// Wait blocks until the group's context ends (the parent's end or an
// actor's return), then stops the group as Stop(nil) does.
func (g *Group) Wait() error {
	<-g.ctx.Done()
	return g.Stop(nil)
}

// Stop starts the deadline's clock and stops every actor, the last added
// first, each after the one before has stopped, all within the deadline.
// It returns the error of an actor that returned before the stop, else
// cause (why the caller stops the group, e.g. a failed start-up step),
// else the actors' Stop errors. The actors are stopped once: a second
// call stops nothing.
func (g *Group) Stop(cause error) error {
	g.cancel(nil) // actors returning from here on are stopping, not failing
	var first error
	if r, ok := context.Cause(g.ctx).(*actorReturn); ok {
		first = r.err
	}
	ctx := g.stop.Context()
	var stopErrs []error
	for i := len(g.actors) - 1; i >= 0; i-- {
		a := g.actors[i]
		g.log.Debug("stopping", "actor", a.Name)
		if err := a.Stop(ctx); err != nil {
			stopErrs = append(stopErrs, err)
		}
	}
	g.actors = nil
	switch {
	case first != nil:
		return first
	case cause != nil:
		return cause
	}
	return errors.Join(stopErrs...)
}

// OnStop returns an actor with nothing to run, only a stop: Run holds its
// place in the group until Stop, which calls stop. It is for the parts of
// the process that must be released in their turn (models, backends,
// traces) and for the marks the stop begins with.
func OnStop(name string, stop func(ctx context.Context) error) Actor {
	stopped := make(chan struct{})
	return Actor{
		Name: name,
		Run:  func() error { <-stopped; return nil },
		Stop: func(ctx context.Context) error {
			defer close(stopped)
			return stop(ctx)
		},
	}
}

// Loop returns an actor running f until Stop cancels f's context; Stop
// waits for f to return, for at most its own context's time. A loop that
// ends by itself (nothing left to do) holds its place until Stop rather
// than stopping the group.
func Loop(name string, f func(ctx context.Context)) Actor {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return Actor{
		Name: name,
		Run: func() error {
			f(ctx)
			close(done)
			<-ctx.Done()
			return nil
		},
		Stop: func(stopCtx context.Context) error {
			cancel()
			select {
			case <-done:
			case <-stopCtx.Done():
			}
			return nil
		},
	}
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
		Stop: func(ctx context.Context) error {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
			return nil
		},
	}
}
