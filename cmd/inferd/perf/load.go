package perf

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// lateAfter is how far behind its schedule a request-rate send may start
// before it counts as delayed. Timer wake-ups routinely run up to a
// millisecond or two late on Linux; less would count that noise.
const lateAfter = 5 * time.Millisecond

// stopGrace is how long a stopping load waits for requests in flight
// before cancelling them.
const stopGrace = 10 * time.Second

// record is one finished request; times are nanoseconds since the
// recorder's base.
type record struct {
	start, end int64
	io         ioTime
	ok, late   bool
}

// recordLog belongs to one sender, so its lock is nearly never contended.
type recordLog struct {
	mu      sync.Mutex
	recs    []record
	lastErr string
}

func (l *recordLog) add(r record, errMsg string) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	if errMsg != "" {
		l.lastErr = errMsg
	}
	l.mu.Unlock()
}

// recorder gathers the records of every sender.
type recorder struct {
	base     time.Time
	finished atomic.Int64 // records added so far: count_windows counts them
	mu       sync.Mutex
	logs     []*recordLog
}

func newRecorder() *recorder { return &recorder{base: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.base)) }

func (r *recorder) newLog() *recordLog {
	l := &recordLog{recs: make([]record, 0, 1024)}
	r.mu.Lock()
	r.logs = append(r.logs, l)
	r.mu.Unlock()
	return l
}

// drain moves every record gathered so far onto dst and returns it with
// the latest error message; the logs keep their capacity for reuse.
func (r *recorder) drain(dst []record) ([]record, string) {
	r.mu.Lock()
	logs := r.logs
	r.mu.Unlock()
	var lastErr string
	for _, l := range logs {
		l.mu.Lock()
		dst = append(dst, l.recs...)
		l.recs = l.recs[:0]
		if l.lastErr != "" {
			lastErr, l.lastErr = l.lastErr, ""
		}
		l.mu.Unlock()
	}
	return dst, lastErr
}

// sender issues the prepared requests round-robin over its protocol.
type sender struct {
	proto protocol
	n     uint64        // requests prepared
	next  atomic.Uint64 // round-robin over them across all senders
	rec   *recorder
}

// send does one request and records it. scheduled < 0 means no schedule
// (closed loop).
func (s *sender) send(ctx context.Context, c conn, log *recordLog, scheduled int64) {
	start := s.rec.now()
	late := scheduled >= 0 && start-scheduled > int64(lateAfter)
	t, err := c.infer(ctx, int((s.next.Add(1)-1)%s.n))
	end := s.rec.now()
	if err != nil && ctx.Err() != nil {
		return // cancelled while stopping: not the server's doing
	}
	var errMsg string
	if err != nil {
		errMsg = err.Error()
	}
	log.add(record{start: start, end: end, io: t, ok: err == nil, late: late}, errMsg)
	s.rec.finished.Add(1)
}

// load is a running load generator.
type load interface {
	stop()
}

// stopper is the shared part of stopping a load: ask the senders to finish
// their current request, and cancel what is still in flight after a grace
// period.
type stopper struct {
	cancel context.CancelFunc
	halt   context.CancelFunc // ends the loops, not the requests
	wg     sync.WaitGroup
}

func (s *stopper) stop() {
	s.halt()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		s.cancel()
		<-done
	}
	s.cancel()
}

// startConcurrency runs n senders that each keep one request in flight.
func startConcurrency(ctx context.Context, s *sender, n int) load {
	reqCtx, cancel := context.WithCancel(ctx)
	loopCtx, halt := context.WithCancel(reqCtx)
	st := &stopper{cancel: cancel, halt: halt}
	for i := 0; i < n; i++ {
		log := s.rec.newLog()
		st.wg.Add(1)
		go func() {
			defer st.wg.Done()
			c := s.proto.conn()
			defer c.close()
			for loopCtx.Err() == nil {
				s.send(reqCtx, c, log, -1)
			}
		}()
	}
	return st
}

// startRate sends rate requests per second on a schedule, whether or not
// earlier ones have finished: an idle sender takes each scheduled send, and
// a new one starts when none is idle, up to maxInFlight. A send that starts
// more than lateAfter behind its schedule counts as delayed.
func startRate(ctx context.Context, s *sender, rate float64, poisson bool, maxInFlight int, rng *rand.Rand) load {
	reqCtx, cancel := context.WithCancel(ctx)
	loopCtx, halt := context.WithCancel(reqCtx)
	st := &stopper{cancel: cancel, halt: halt}
	jobs := make(chan int64) // unbuffered: a hand-off succeeds only to an idle sender
	interval := float64(time.Second) / rate
	worker := func(first int64) {
		defer st.wg.Done()
		log := s.rec.newLog()
		c := s.proto.conn()
		defer c.close()
		s.send(reqCtx, c, log, first)
		for sched := range jobs {
			s.send(reqCtx, c, log, sched)
		}
	}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		defer close(jobs)
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		workers := 0
		next := float64(s.rec.now())
		for {
			if wait := time.Duration(int64(next) - s.rec.now()); wait > 0 {
				timer.Reset(wait)
				select {
				case <-loopCtx.Done():
					return
				case <-timer.C:
				}
			} else if loopCtx.Err() != nil {
				return
			}
			sched := int64(next)
			select {
			case jobs <- sched:
			default:
				if workers < maxInFlight {
					workers++
					st.wg.Add(1)
					go worker(sched)
					break
				}
				select { // every sender busy: this send will be late
				case jobs <- sched:
				case <-loopCtx.Done():
					return
				}
			}
			if poisson {
				next += rng.ExpFloat64() * interval
			} else {
				next += interval
			}
		}
	}()
	return st
}
