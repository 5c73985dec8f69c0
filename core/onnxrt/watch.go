package onnxrt

import (
	"context"
	"sync"
	"time"
)

// watchAfter is how long a run goes before its context is watched. A
// context.AfterFunc registered for every run cost about a microsecond and
// four allocations per call (BENCHMARKS.md "CPU per request against the
// bare handlers"): more than a small model's whole run, to be able to stop
// a run that would have ended anyway. A run that outlasts watchAfter
// registers it then, from a timer made once per instance; a client that
// goes away earlier still gets its answer within watchAfter and a node.
const watchAfter = time.Millisecond

// runWatch is an instance's deferred watch over its running execution's
// context (one run at a time: it is used under instance.mu). Its timer,
// terminate and fired are made with the first watched run and reused, as
// a closure, a channel and a registration per run were allocations on
// every request.
type runWatch struct {
	timer *time.Timer
	after time.Duration // watchAfter; tests shorten it
	// terminate is what the run's context calls once done: it terminates
	// the run, then signals fired, which unwatch waits for before the
	// options are reused.
	terminate func()
	fired     chan struct{}

	mu sync.Mutex // between the run and the timer's goroutine
	// ctx is the context of the run under way; nil between runs.
	ctx context.Context
	// stop undoes the AfterFunc registered once the run outlasted
	// watchAfter; nil until then.
	stop func() bool
}

// watchRun arms the watch for a run on ctx and reports whether unwatch
// must follow the run. A context already done terminates the run at its
// start.
func (in *instance) watchRun(ctx context.Context) bool {
	if ctx.Done() == nil {
		return false // it never ends
	}
	w := &in.watch
	if w.terminate == nil {
		// Made on the run's side of in.mu, before the timer that reads
		// it exists.
		w.fired = make(chan struct{}, 1)
		w.terminate = func() {
			_ = in.runOpts.Terminate()
			w.fired <- struct{}{}
		}
		if w.after == 0 {
			w.after = watchAfter
		}
	}
	w.mu.Lock()
	w.ctx = ctx
	if ctx.Err() != nil {
		w.stop = context.AfterFunc(ctx, w.terminate) // fires at once
	}
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.after, in.watchLate)
	} else {
		w.timer.Reset(w.after)
	}
	return true
}

// watchLate runs on the timer's goroutine: the run has gone on for
// watchAfter, so its context is now watched for the rest of it.
func (in *instance) watchLate() {
	w := &in.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	// A timer that fired as its run ended finds no run (or, late, the
	// next one, whose unwatch undoes what it registers).
	if w.ctx != nil && w.stop == nil {
		w.stop = context.AfterFunc(w.ctx, w.terminate)
	}
}

// unwatch ends the watch after a run. A termination that fired is waited
// for and undone, so the next run starts with clean options.
func (in *instance) unwatch() {
	w := &in.watch
	w.timer.Stop()
	w.mu.Lock()
	stop := w.stop
	w.ctx, w.stop = nil, nil
	w.mu.Unlock()
	if stop != nil && !stop() {
		<-w.fired
		_ = in.runOpts.UnsetTerminate() // the options are reused by the next run
	}
}

// close stops the timer for good (Close, under instance.mu).
func (w *runWatch) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
