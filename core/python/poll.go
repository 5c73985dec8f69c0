package python

import (
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollFor bounds how long the reader polls the worker's socket after an
// execute was written (see replyPoll).
const pollFor = 200 * time.Microsecond

// yielded: a yield that took longer let other work run, so the CPU is
// wanted, not idle, and polling rests for pollRest.
const (
	yielded  = 20 * time.Microsecond
	pollRest = time.Second
)

// replyPoll decides whether the reader polls the worker's socket instead
// of sleeping in the network poller. Waking a thread whose CPU went idle
// costs about as much as a small execute takes (tens of µs on a virtual
// machine), and the answer to a small execute comes within that. So
// while an execute is unanswered, and the last one was answered within
// pollFor, the reader polls for up to pollFor after the write, yielding
// its CPU between polls; an execute answered later turns polling off
// until one is answered in time again, and a busy CPU rests it (the
// worker's own polling is inferd_python_worker.py's _fill).
type replyPoll struct {
	born    time.Time    // the clock's origin, for the times below
	pending atomic.Int32 // executes written and not yet answered
	sent    atomic.Int64 // when the last execute was written, ns after born
	quick   atomic.Bool  // the last execute was answered within pollFor
	rest    atomic.Int64 // no polling before this, ns after born
}

func newReplyPoll() *replyPoll { return &replyPoll{born: time.Now()} }

// sending notes an execute about to be written.
func (p *replyPoll) sending() {
	p.sent.Store(int64(time.Since(p.born)))
	p.pending.Add(1)
}

// answered notes an execute's answer.
func (p *replyPoll) answered() {
	p.pending.Add(-1)
	now := int64(time.Since(p.born))
	p.quick.Store(time.Duration(now-p.sent.Load()) < pollFor && now >= p.rest.Load())
}

// busy notes that a yield let other work run.
func (p *replyPoll) busy() {
	p.quick.Store(false)
	p.rest.Store(int64(time.Since(p.born) + pollRest))
}

// polling reports whether the reader should poll now rather than sleep.
func (p *replyPoll) polling() bool {
	return p.pending.Load() > 0 && p.quick.Load() && time.Duration(int64(time.Since(p.born))-p.sent.Load()) < pollFor
}

// pollReader reads the worker's socket, polling it while p says so. Its
// read function is made once, and a call's buffer and result pass through
// its fields: a closure per call would cost allocations per frame.
type pollReader struct {
	rc     syscall.RawConn
	p      *replyPoll
	readFn func(fd uintptr) bool
	buf    []byte
	n      int
	err    error
}

func newPollReader(rc syscall.RawConn, p *replyPoll) *pollReader {
	r := &pollReader{rc: rc, p: p}
	r.readFn = r.readOnce
	return r
}

func (r *pollReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.buf = b
	rerr := r.rc.Read(r.readFn)
	n, err := r.n, r.err
	r.buf, r.err = nil, nil
	switch {
	case rerr != nil:
		return 0, rerr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce reads into r.buf, polling while r.p says so; false: wait
// until the socket is readable, then call it again.
func (r *pollReader) readOnce(fd uintptr) bool {
	for {
		n, err := unix.Read(int(fd), r.buf)
		r.n, r.err = max(n, 0), err
		switch {
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return true
		case !r.p.polling():
			return false // sleep until the socket is readable
		}
		// Let this process's goroutines and, on this CPU, other
		// processes (the worker) run first.
		t := time.Now()
		runtime.Gosched()
		_, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		if time.Since(t) > yielded {
			r.p.busy()
			return false
		}
	}
}

// socketReader is how the reader reads conn: polling where conn allows
// it (a Unix socket), else conn itself.
func socketReader(conn net.Conn, p *replyPoll) io.Reader {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return newPollReader(rc, p)
}
