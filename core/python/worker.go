package python

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
)

// worker is one Python process and its connection (inferd's design, not
// Triton's stub and shared memory): the process runs inferd_python_worker.py with one end of a
// socketpair as fd 3; its stdout and stderr go to the server log.
type worker struct {
	name string // the instance name, in messages and logs
	log  *slog.Logger
	cmd  *exec.Cmd
	conn net.Conn

	// wlock holds one token: one frame at a time on conn. A channel, so a
	// call with a deadline (is_ready) can give up waiting for its turn.
	wlock chan struct{}

	mu      sync.Mutex
	seq     int64
	replies map[int64]chan frameIn // a server request's reply, by seq
	dead    error                  // set once the worker is gone
	gone    chan struct{}          // closed with dead set
	exited  chan struct{}          // closed when the process has been reaped
	pgid    int                    // the worker's process group: itself and its children
	stderr  *tail                  // the last lines of stderr, for errors
	// decided is closed once the instance's supervisor, told the worker is
	// gone, has begun its restart or chosen not to (see liveWorker).
	decided chan struct{}

	// arena is the shared memory the worker maps as fd 4: the first half
	// carries execute's large inputs, the second its reply's outputs. An
	// execute holds arenaMu for reading while it uses the arena, so the
	// arena is unmapped only after.
	arenaMu sync.RWMutex
	arena   []byte
	// slots number the executions that may be in flight at once (see
	// instance.Depth); each half of the arena is split between them.
	slots chan int

	// handle serves the worker's own messages (send, log, bls, ...); it
	// runs on the reader goroutine and must not block on model work. It
	// is set before the reader starts and never changes.
	handle func(op string, f frameIn)
	// hasIsReady: the model defines is_ready().
	hasIsReady bool
	// ready holds one token: one is_ready() check at a time; a check that
	// cannot have it within its deadline reports the model not ready.
	ready chan struct{}
	// poll says when the reader polls for an execute's answer (poll.go).
	poll *replyPoll
	// fork is set for a worker forked from a zygote (fork.go): not the
	// server's child, so cmd is nil and its zygote says how it ended.
	fork *forked
}

// errUnhealthy is Triton's message for a worker that died.
func errUnhealthy(instance string) *core.Error {
	return core.Errorf(core.CodeInternal, "Stub process '%s' is not healthy.", instance)
}

// depth is how many executions a worker takes at once: the next one waits
// in its socket while it runs the last (core.Pipeliner).
const depth = 2

// startWorker starts the worker process and waits for its "ready".
func startWorker(ctx context.Context, p procSpec) (*worker, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start Python worker %s: socketpair: %w", p.instance, err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "inferd-worker"), os.NewFile(uintptr(fds[1]), "inferd-worker-child")
	defer child.Close()
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		return nil, fmt.Errorf("start Python worker %s: %w", p.instance, err)
	}
	w := newWorker(p.instance, p.log, conn)
	cmd := exec.Command(p.python, p.script)
	cmd.ExtraFiles = []*os.File{child} // fd 3
	if p.arena > 0 {
		f, mem, err := newArena(2 * p.arena)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("start Python worker %s: %w", p.instance, err)
		}
		defer f.Close() // the worker keeps its own descriptor
		w.arena = mem
		cmd.ExtraFiles = append(cmd.ExtraFiles, f) // fd 4
	}
	cmd.Env = p.env
	cmd.Stdin = nil
	stdout, stderr := &logWriter{log: p.log, stream: "stdout"}, &logWriter{log: p.log, stream: "stderr", tail: w.stderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The worker dies with the server, whatever kills it, and leads a
	// process group of its own: what its model starts (subprocess.Popen)
	// is killed with it. A child that outlives it may still hold its
	// stdout and stderr: WaitDelay keeps Wait from waiting for them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		conn.Close()
		w.freeArena()
		return nil, core.Errorf(core.CodeInternal, "failed to start the Python worker for '%s' with %s: %v", p.instance, p.python, err)
	}
	w.cmd, w.pgid = cmd, cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		// Wait has stopped copying the worker's output.
		stdout.flush()
		stderr.flush()
		w.die(fmt.Errorf("exited: %v", err))
		// Children left behind go too (the group outlives its leader
		// while any of them runs, so its id is not reused meanwhile).
		w.killGroup()
		w.freeArena()
		close(w.exited)
	}()
	ready := w.setHandle(p.handle)
	go w.read()
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	select {
	case <-ready:
		return w, nil
	case <-w.exited:
		return nil, w.startError()
	case <-timer.C:
		w.kill()
		return nil, errUnhealthy(p.instance)
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	}
}

// newWorker is a worker over conn, its process not yet known.
func newWorker(name string, log *slog.Logger, conn net.Conn) *worker {
	w := &worker{name: name, log: log, conn: conn, replies: map[int64]chan frameIn{},
		gone: make(chan struct{}), exited: make(chan struct{}), decided: make(chan struct{}), stderr: &tail{max: 20}, slots: make(chan int, depth),
		wlock: make(chan struct{}, 1), ready: make(chan struct{}, 1), poll: newReplyPoll()}
	for i := range depth {
		w.slots <- i
	}
	return w
}

// setHandle sets the worker's handler before its reader starts; the
// channel gets the worker's "ready".
func (w *worker) setHandle(handle func(w *worker, op string, f frameIn)) <-chan frameIn {
	ready := make(chan frameIn, 1)
	w.handle = func(op string, f frameIn) {
		switch {
		case op == "ready":
			select {
			case ready <- f:
			default: // only the first counts
			}
		case handle != nil:
			handle(w, op, f)
		}
	}
	return ready
}

// startError explains a worker that exited before it was ready: the last
// line it wrote to stderr (a missing numpy, a broken interpreter).
func (w *worker) startError() error {
	if line := w.stderr.last(); line != "" {
		return core.Errorf(core.CodeInternal, "Stub process '%s' is not healthy: %s", w.name, line)
	}
	return errUnhealthy(w.name)
}

// procSpec says how to start a worker.
type procSpec struct {
	// handle serves the worker's own messages (none: they are dropped);
	// it is set before the reader starts.
	handle   func(w *worker, op string, f frameIn)
	arena    int // bytes per direction of the shared arena; 0: none
	instance string
	python   string
	script   string
	env      []string
	timeout  time.Duration
	log      *slog.Logger
}

// read reads the worker's frames until the connection ends, routing
// replies to their callers and everything else to handle.
func (w *worker) read() {
	r := bufio.NewReaderSize(socketReader(w.conn, w.poll), 64<<10)
	var lastDone time.Time // when the last execute_done arrived
	for {
		f, err := readFrame(r)
		w.arenaMu.RLock()
		if len(w.arena) > 0 {
			f.arena = w.arena[len(w.arena)/2:]
		}
		w.arenaMu.RUnlock()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				w.log.Error("Python worker protocol error", "err", err)
			}
			w.die(err)
			return
		}
		h, err := route(f.header)
		if err != nil {
			w.log.Error("Python worker sent a malformed header", "err", err)
			w.die(err)
			return
		}
		switch h.Op {
		case "execute_done":
			// The worker runs executes one after the other: this one's
			// model code began when the previous one was answered.
			now := time.Now()
			f.after, lastDone = lastDone, now
			w.poll.answered()
			fallthrough
		case "init_done", "auto_complete_done", "is_ready_done", "finalize_done":
			w.mu.Lock()
			ch := w.replies[h.Seq]
			delete(w.replies, h.Seq)
			w.mu.Unlock()
			if ch != nil {
				ch <- f
			}
		default:
			w.handle(h.Op, f)
		}
	}
}

// die marks the worker gone: every waiting call fails. It is idempotent.
func (w *worker) die(cause error) {
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return
	}
	w.dead = errUnhealthy(w.name)
	replies := w.replies
	w.replies = map[int64]chan frameIn{}
	w.mu.Unlock()
	w.log.Debug("Python worker gone", "cause", cause)
	close(w.gone)
	_ = w.conn.Close()
	// A worker whose connection ended is of no more use: it goes now,
	// with its children, so Wait returns and a restart may begin.
	w.killGroup()
	for _, ch := range replies {
		close(ch)
	}
}

// err is the worker's death, or nil while it lives.
func (w *worker) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead
}

// call sends op and waits for its reply (matched by seq; the replies of
// init, auto_complete and finalize carry none and use seq 0).
func (w *worker) call(ctx context.Context, op string, header map[string]any, out *frameOut) (frameIn, error) {
	_, numbered := header["seq"]
	return w.exchange(ctx, numbered, func(seq int64) any {
		if numbered {
			header["seq"] = seq
		}
		header["op"] = op
		return header
	}, out)
}

// exchange sends the header frame(seq) builds, numbered when asked, and
// waits for its reply.
func (w *worker) exchange(ctx context.Context, numbered bool, frame func(seq int64) any, out *frameOut) (frameIn, error) {
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return frameIn{}, w.dead
	}
	seq := int64(0)
	if numbered {
		w.seq++
		seq = w.seq
	}
	ch := make(chan frameIn, 1)
	w.replies[seq] = ch
	w.mu.Unlock()
	deadline, _ := ctx.Deadline()
	if err := w.sendBy(deadline, frame(seq), out); err != nil {
		w.mu.Lock()
		delete(w.replies, seq)
		w.mu.Unlock()
		if errors.Is(err, errWriteTurn) {
			return frameIn{}, err
		}
		return frameIn{}, w.err()
	}
	select {
	case f, ok := <-ch:
		if !ok {
			return frameIn{}, w.err()
		}
		return f, nil
	case <-ctx.Done():
		return frameIn{}, ctx.Err()
	}
}

// send writes one frame; a write that fails means the worker is gone.
func (w *worker) send(header any, out *frameOut) error {
	return w.sendBy(time.Time{}, header, out)
}

// errWriteTurn: a call with a deadline did not get its turn to write.
var errWriteTurn = errors.New("the worker's socket is busy")

// sendBy is send bounded by deadline (zero: none), both the wait for the
// turn to write and the write itself. A write that times out after part of
// its frame went out has broken the stream: the worker is killed (and, by
// default, restarted); one that wrote nothing only fails.
func (w *worker) sendBy(deadline time.Time, header any, out *frameOut) error {
	if out == nil {
		out = &frameOut{}
	}
	if deadline.IsZero() {
		w.wlock <- struct{}{}
	} else {
		t := time.NewTimer(time.Until(deadline))
		select {
		case w.wlock <- struct{}{}:
			t.Stop()
		case <-t.C:
			return errWriteTurn
		}
		_ = w.conn.SetWriteDeadline(deadline)
	}
	n, err := out.writeCount(w.conn, header)
	if !deadline.IsZero() {
		_ = w.conn.SetWriteDeadline(time.Time{})
	}
	<-w.wlock
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if n == 0 {
				return errWriteTurn // nothing went out: the stream is whole
			}
			w.log.Error("the Python worker took no message for too long; killing it", "err", err)
			w.kill()
		}
		w.die(err)
	}
	return err
}

// waitDelay bounds how long Wait waits for the worker's stdout and stderr
// once it has exited: a child holding them cannot make Wait hang.
const waitDelay = time.Second

// reapGrace bounds the wait for a killed worker to be reaped.
const reapGrace = 5 * time.Second

// stop asks the worker to finalize and exit, then kills it if it has not
// within grace. It reports whether the worker exited by itself.
func (w *worker) stop(grace time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return w.stopBy(ctx)
}

// stopBy asks the worker to finalize and exit, and when ctx ends first
// kills its process group; it never waits past ctx for the worker, and
// only reapGrace more for the kernel to reap it. It reports whether the
// worker exited by itself.
func (w *worker) stopBy(ctx context.Context) bool {
	if w.err() == nil && ctx.Err() == nil {
		_, _ = w.call(ctx, "finalize", map[string]any{}, nil)
	}
	select {
	case <-w.exited:
		return true
	case <-ctx.Done():
	}
	w.kill()
	select {
	case <-w.exited:
	case <-time.After(reapGrace):
		w.log.Error("Python worker not reaped after it was killed", "pid", w.pgid)
	}
	return false
}

// kill kills the worker and its children.
func (w *worker) kill() {
	w.killGroup()
	w.die(errors.New("killed"))
}

// killGroup sends SIGKILL to the worker's process group.
func (w *worker) killGroup() {
	if w.pgid > 0 {
		_ = syscall.Kill(-w.pgid, syscall.SIGKILL)
	}
}

// logWriter sends each line a worker writes to the server log, labelled
// with the stream (the logger carries the model and instance). A line
// longer than maxLogLine is logged in pieces, so output without newlines
// is not held in memory.
type logWriter struct {
	log    *slog.Logger
	stream string
	tail   *tail
	buf    []byte
}

// maxLogLine is the longest line logWriter holds.
const maxLogLine = 64 << 10

func (l *logWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	start := 0
	for {
		rest := l.buf[start:]
		end, next := bytes.IndexByte(rest, '\n'), 0
		switch {
		case end >= 0 && end <= maxLogLine:
			next = end + 1
		case len(rest) >= maxLogLine:
			// Cut before a UTF-8 sequence that would be split.
			end = maxLogLine
			for i := maxLogLine; i < len(rest) && i > maxLogLine-utf8.UTFMax; i-- {
				if utf8.RuneStart(rest[i]) {
					end = i
					break
				}
			}
			next = end
		default:
			l.buf = l.buf[:copy(l.buf, rest)]
			return len(p), nil
		}
		l.line(string(rest[:end]))
		start += next
	}
}

// flush logs what is left without a newline; the worker has exited.
func (l *logWriter) flush() {
	if len(l.buf) > 0 {
		l.line(string(l.buf))
		l.buf = l.buf[:0]
	}
}

func (l *logWriter) line(text string) {
	l.log.Info(text, "stream", l.stream)
	if l.tail != nil {
		l.tail.add(text)
	}
}

// tail keeps the last lines a stream wrote.
type tail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if strings.TrimSpace(line) == "" {
		return
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[1:]
	}
}

// all is the lines kept, oldest first.
func (t *tail) all() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// newArena makes an anonymous shared-memory file of size bytes, mapped
// here; the kernel gives it pages only as they are written.
func newArena(size int) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate("inferd-python-arena", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inferd-python-arena")
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("size the arena: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("map the arena: %w", err)
	}
	return f, mem, nil
}

// freeArena unmaps the arena once the worker is gone.
func (w *worker) freeArena() {
	w.arenaMu.Lock()
	defer w.arenaMu.Unlock()
	if w.arena != nil {
		_ = unix.Munmap(w.arena)
		w.arena = nil
	}
}
