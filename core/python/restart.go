package python

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Dead workers. Triton leaves the instance of a stub that died unable to
// serve, and its model not ready, until the model is reloaded: the restart
// of a dead stub in triton-inference-server/python_backend src/python_be.cc
// went with release 24.06 (python_backend pull request 360). inferd, unless
// restart-dead-workers=false, starts a new worker in its place with a
// backoff. Either way the requests the dead
// worker held fail at once with "Stub process '<instance>' is not
// healthy.", and the instance is not ready while it has no live worker.

// Restart backoff: the first restart after a worker that ran for
// stableAfter is immediate, each further one waits twice as long as the
// last, from minBackoff up to maxBackoff.
const (
	minBackoff  = 100 * time.Millisecond
	maxBackoff  = 10 * time.Second
	stableAfter = 30 * time.Second
)

// nextBackoff is the wait before the restart after one that waited d.
func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return minBackoff
	}
	return min(2*d, maxBackoff)
}

// restartsName is the counter of restarts per instance.
const restartsName = "inferd_python_worker_restarts_total"

var restartsDesc = prometheus.NewDesc(restartsName,
	"Number of times the Python worker of a model instance died and was restarted",
	[]string{"model", "version", "instance"}, nil)

// instanceKey names an instance in the restart counter.
type instanceKey struct{ model, version, instance string }

func (in *instance) key() instanceKey {
	return instanceKey{in.model, strconv.FormatInt(in.spec.Version, 10), in.name}
}

// supervise watches the instance's worker w until the instance closes:
// when a worker dies, the requests it held fail, the cause is logged, and
// unless restarts are off a new worker takes its place.
func (in *instance) supervise(w *worker) {
	defer close(in.supervised)
	defer func() {
		in.mu.Lock()
		in.endAttempt()
		in.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		started := time.Now()
		select {
		case <-w.gone:
		case <-in.life.Done():
			return // Close stops the worker
		}
		if time.Since(started) >= stableAfter {
			backoff = 0
		}
		if backoff == 0 && !in.b.opts.KeepDead {
			// A restart follows at once: executions wait for it.
			in.beginAttempt()
		}
		close(w.decided)
		in.failOf(w, errUnhealthy(in.name))
		select {
		case <-w.exited: // soon: a worker that is gone is killed
		case <-in.life.Done():
			return
		}
		if in.life.Err() != nil {
			return // killed by an unload or a shutdown, not dead
		}
		in.logDeath(w)
		if in.b.opts.KeepDead {
			in.b.log.Warn("the instance stays not ready until the model is reloaded (restart-dead-workers=false)",
				"model", in.model, "instance", in.name)
			return
		}
		for {
			if backoff > 0 {
				in.b.log.Warn("restarting the Python worker", "model", in.model, "instance", in.name, "after", backoff)
			} else {
				in.b.log.Warn("restarting the Python worker", "model", in.model, "instance", in.name)
			}
			select {
			case <-time.After(backoff):
			case <-in.life.Done():
				return
			}
			backoff = nextBackoff(backoff)
			in.beginAttempt()
			fresh, err := in.spawn(in.life)
			in.mu.Lock()
			in.endAttempt()
			if in.closing || in.life.Err() != nil {
				in.mu.Unlock()
				if err == nil {
					fresh.stop(in.b.opts.StubTimeout)
				}
				return
			}
			if err == nil {
				in.w = fresh
				in.mu.Unlock()
				in.b.countRestart(in.key())
				in.b.log.Info("restarted the Python worker", "model", in.model, "instance", in.name, "pid", fresh.pgid)
				w = fresh
				break
			}
			in.mu.Unlock()
			in.b.log.Error("failed to restart the Python worker", "model", in.model, "instance", in.name, "err", err)
		}
	}
}

// beginAttempt says a restart is under way or follows at once. The
// instance stays out of service for it at most the stub timeout: a restart
// whose initialize takes longer (or hangs) goes on, but the requests
// waiting for it fail meanwhile instead of waiting without bound.
func (in *instance) beginAttempt() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.attempt != nil {
		return
	}
	ch := make(chan struct{})
	in.attempt = ch
	time.AfterFunc(in.b.opts.StubTimeout, func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.attempt == ch {
			in.endAttempt()
		}
	})
}

// endAttempt wakes the executions waiting for a restart; in.mu is held.
func (in *instance) endAttempt() {
	if in.attempt != nil {
		close(in.attempt)
		in.attempt = nil
	}
}

// logDeath logs why w died: its exit status or signal and the last lines
// it wrote to stderr.
func (in *instance) logDeath(w *worker) {
	in.b.log.Error("Python worker died", "model", in.model, "version", in.spec.Version, "instance", in.name,
		"pid", w.pgid, "status", exitStatus(w), "stderr", strings.Join(w.stderr.all(), "\n"))
}

// exitStatus says how the worker's process ended.
func exitStatus(w *worker) string {
	if w.fork != nil {
		return w.fork.status // as its zygote reported it
	}
	st := w.cmd.ProcessState
	if st == nil {
		return "unknown"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			return "killed by signal " + unix.SignalName(ws.Signal())
		case ws.Exited():
			return fmt.Sprintf("exit status %d", ws.ExitStatus())
		}
	}
	return st.String()
}

// restartCount is one instance name's restart counter; refs counts the
// loaded instances of that name: a reload loads the new copy before it
// closes the old one, and the counter lives on through it.
type restartCount struct {
	n    uint64
	refs int
}

// countRestart adds one to the instance's restart counter.
func (b *Backend) countRestart(k instanceKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.restarts[k]; c != nil {
		c.n++
	}
}

// trackRestarts shows the instance's counter (at 0 the first time) until
// every instance of its name has called forgetRestarts.
func (b *Backend) trackRestarts(k instanceKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.restarts[k]
	if c == nil {
		c = &restartCount{}
		b.restarts[k] = c
	}
	c.refs++
}

func (b *Backend) forgetRestarts(k instanceKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.restarts[k]; c != nil {
		if c.refs--; c.refs <= 0 {
			delete(b.restarts, k)
		}
	}
}

// collectRestarts sends the restart counters.
func (b *Backend) collectRestarts(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	ms := make([]prometheus.Metric, 0, len(b.restarts))
	for k, c := range b.restarts {
		ms = append(ms, prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(c.n), k.model, k.version, k.instance))
	}
	b.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
}
