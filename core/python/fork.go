package python

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Forked instances (FORK_INSTANCES, an inferd extension; docs/python_backend.md,
// "Forked instances"). One worker per loaded model version, the zygote,
// imports the model and runs initialize once, with the args of the
// instance whose fork started it; every KIND_CPU instance is then a
// worker forked from it copy-on-write (shim/inferd_python_zygote.py). The
// server makes each instance's socket, arena and stdout/stderr pipes and
// passes them with the fork command (SCM_RIGHTS, unix(7)). A forked worker
// is the zygote's child, not the server's: the zygote reaps it and reports
// how it ended; it dies with the zygote (PR_SET_PDEATHSIG), as the zygote
// dies with the server. A dead forked worker is forked again; a dead
// zygote kills its children, whose restarts start a new zygote.

// forkParam is the model parameter that turns forking on.
const forkParam = "FORK_INSTANCES"

// errForkRefused: the model cannot be forked safely; its instances start
// as plain workers.
var errForkRefused = errors.New("forking refused")

// forkRequested reads FORK_INSTANCES; a value that is not a boolean fails
// the load.
func forkRequested(cfg *modelconfig.ModelConfig) (bool, error) {
	p, ok := cfg.GetParameters()[forkParam]
	if !ok || strings.TrimSpace(p.GetStringValue()) == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(strings.TrimSpace(p.GetStringValue()))
	if err != nil {
		return false, core.Errorf(core.CodeInvalidArg, "model '%s': parameter %s must be true or false, not '%s'", cfg.GetName(), forkParam, p.GetStringValue())
	}
	return on, nil
}

// zygote is one loaded model version's warm parent.
type zygote struct {
	b    *Backend
	key  *modelconfig.ModelConfig
	refs int // the instances that use it, under b.mu

	mu         sync.Mutex
	w          *worker       // the zygote; nil until started, and once it died
	starting   chan struct{} // closed when the start under way ends
	refused    bool          // initialize left threads: no forks
	closed     bool          // its last instance closed
	hasIsReady bool
	seq        int64
	pending    map[int64]*forked // forks sent, not yet answered, by seq
	children   map[int]*forked   // forked workers not yet reaped, by pid
}

// forked is what a forked worker has that a started one has not.
type forked struct {
	w      *worker
	zw     *worker        // the zygote it was forked from
	reply  chan forkReply // the zygote's answer to the fork command
	once   sync.Once
	status string        // how it ended, set before w.exited closes
	outs   []*os.File    // the read ends of its stdout and stderr
	copied chan struct{} // closed when both are read to their end
}

type forkReply struct {
	pid int
	err error
}

// zygoteFor is the zygote the instance forks from, held until
// releaseZygote; nil when the instance is not to be forked.
func (b *Backend) zygoteFor(spec core.InstanceSpec) *zygote {
	if on, _ := forkRequested(spec.Config); !on {
		return nil
	}
	if spec.Kind != modelconfig.ModelInstanceGroup_KIND_CPU {
		// A CUDA context does not carry over into a forked child (PyTorch
		// refuses: "Cannot re-initialize CUDA in forked subprocess").
		b.log.Warn("FORK_INSTANCES applies to KIND_CPU instances only: this instance starts a worker of its own",
			"model", spec.ModelName, "instance", spec.Name, "kind", spec.Kind.String())
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	z := b.zygotes[spec.Config]
	if z == nil {
		z = &zygote{b: b, key: spec.Config, pending: map[int64]*forked{}, children: map[int]*forked{}}
		b.zygotes[spec.Config] = z
	}
	z.refs++
	return z
}

// releaseZygote drops an instance's hold; the last one stops the zygote.
func (b *Backend) releaseZygote(z *zygote) {
	b.mu.Lock()
	z.refs--
	last := z.refs == 0
	if last && b.zygotes[z.key] == z {
		delete(b.zygotes, z.key)
	}
	b.mu.Unlock()
	if !last {
		return
	}
	z.mu.Lock()
	z.closed = true
	w := z.w
	z.mu.Unlock()
	if w != nil {
		w.stop(b.opts.StubTimeout)
	}
}

// ensure is the live zygote, started (and its model initialized with in's
// args) when there is none; one start at a time.
func (z *zygote) ensure(ctx context.Context, in *instance) (*worker, error) {
	for {
		z.mu.Lock()
		switch {
		case z.closed:
			z.mu.Unlock()
			return nil, errUnhealthy(in.name)
		case z.refused:
			z.mu.Unlock()
			return nil, errForkRefused
		case z.w != nil && z.w.err() == nil:
			w := z.w
			z.mu.Unlock()
			return w, nil
		case z.starting != nil:
			ch := z.starting
			z.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		z.starting = ch
		z.mu.Unlock()
		w, err := z.start(ctx, in)
		z.mu.Lock()
		z.starting = nil
		close(ch)
		closed := z.closed
		if err == nil && !closed {
			z.w = w
		}
		z.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if closed {
			w.stop(z.b.opts.StubTimeout)
			return nil, errUnhealthy(in.name)
		}
		go z.watch(w)
		return w, nil
	}
}

// start starts the zygote and initializes its model with in's args. A
// model that left threads running is refused: forking would copy them
// without their threads.
func (z *zygote) start(ctx context.Context, in *instance) (*worker, error) {
	spec := in.spec
	handle := func(w *worker, op string, f frameIn) {
		switch op {
		case "forked":
			z.onForked(w, f)
		case "exited":
			z.onExited(w, f)
		default:
			in.handle(w, op, f) // initialize's logs, metrics and BLS calls
		}
	}
	w, err := z.b.startProc(ctx, spec.VersionFiles, spec.Config, spec.ModelName+"_zygote", handle, 0)
	if err != nil {
		return nil, err
	}
	threads, err := in.initialize(ctx, w, true)
	if err != nil {
		return nil, err
	}
	if len(threads) > 0 {
		z.b.log.Warn("FORK_INSTANCES refused: initialize left threads running, which a fork does not copy; each instance starts a worker of its own",
			"model", spec.ModelName, "threads", strings.Join(threads, ", "))
		z.mu.Lock()
		z.refused = true
		z.mu.Unlock()
		go w.stop(z.b.opts.StubTimeout)
		return nil, errForkRefused
	}
	z.mu.Lock()
	z.hasIsReady = w.hasIsReady
	z.mu.Unlock()
	z.b.log.Info("Python zygote ready: instances are forked from it", "model", spec.ModelName, "pid", w.pgid)
	return w, nil
}

// watch waits for the zygote to exit: its children, which die with it,
// end, and the next fork starts a new zygote.
func (z *zygote) watch(w *worker) {
	<-w.exited
	z.mu.Lock()
	if z.w == w {
		z.w = nil
	}
	closed := z.closed
	var orphans []*forked
	// A new zygote may have started meanwhile: only this one's children.
	for seq, fk := range z.pending {
		if fk.zw == w {
			orphans = append(orphans, fk)
			delete(z.pending, seq)
		}
	}
	for pid, fk := range z.children {
		if fk.zw == w {
			orphans = append(orphans, fk)
			delete(z.children, pid)
		}
	}
	z.mu.Unlock()
	if !closed && z.b.life.Err() == nil {
		z.b.log.Error("Python zygote died: its instances are forked again from a new one", "model", z.key.GetName(),
			"pid", w.pgid, "status", exitStatus(w), "stderr", strings.Join(w.stderr.all(), "\n"))
	}
	for _, fk := range orphans {
		go fk.end("killed by signal SIGKILL (its zygote exited)")
	}
}

// onForked routes the zygote's answer to a fork command.
func (z *zygote) onForked(w *worker, f frameIn) {
	var m struct {
		Seq   int64  `json:"seq"`
		PID   int    `json:"pid"`
		Error string `json:"error"`
	}
	if err := decode(f, &m); err != nil {
		w.log.Error("Python zygote", "err", err)
		return
	}
	z.mu.Lock()
	fk := z.pending[m.Seq]
	delete(z.pending, m.Seq)
	if fk != nil && m.PID > 0 {
		fk.w.pgid = m.PID // the child leads its own process group
		z.children[m.PID] = fk
	}
	z.mu.Unlock()
	if fk == nil {
		return
	}
	r := forkReply{pid: m.PID}
	if m.Error != "" || m.PID <= 0 {
		r.err = fmt.Errorf("the zygote did not fork: %s", m.Error)
	}
	fk.reply <- r
}

// onExited: the zygote reaped a child.
func (z *zygote) onExited(w *worker, f frameIn) {
	var m struct {
		PID    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := decode(f, &m); err != nil {
		w.log.Error("Python zygote", "err", err)
		return
	}
	z.mu.Lock()
	fk := z.children[m.PID]
	delete(z.children, m.PID)
	z.mu.Unlock()
	if fk != nil {
		go fk.end(m.Status)
	}
}

// fork forks a worker for in from the zygote, starting the zygote if
// none runs; errForkRefused when the model cannot be forked.
func (z *zygote) fork(ctx context.Context, in *instance) (*worker, error) {
	zw, err := z.ensure(ctx, in)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	w, files, err := z.newChild(in)
	if err != nil {
		return nil, err
	}
	fk := w.fork
	fk.zw = zw
	z.mu.Lock()
	z.seq++
	seq := z.seq
	z.pending[seq] = fk
	hasIsReady := z.hasIsReady
	z.mu.Unlock()
	ready := w.setHandle(in.handle)
	go w.read()
	err = zw.sendFiles(map[string]any{"op": "fork", "seq": seq, "instance": in.name, "arena": w.arena != nil}, files)
	for _, f := range files {
		f.Close() // the zygote has its own copies now
	}
	if err != nil {
		z.mu.Lock()
		delete(z.pending, seq)
		z.mu.Unlock()
		fk.end("not forked")
		return nil, errUnhealthy(in.name)
	}
	timer := time.NewTimer(z.b.opts.StubTimeout)
	defer timer.Stop()
	select {
	case r := <-fk.reply:
		if r.err != nil {
			fk.end("not forked")
			in.b.log.Error("Python zygote failed to fork", "model", in.model, "instance", in.name, "err", r.err)
			return nil, errUnhealthy(in.name)
		}
	case <-w.exited: // the zygote died
		return nil, errUnhealthy(in.name)
	case <-timer.C:
		// A zygote that does not answer forks nothing more: a new one
		// takes its place (watch ends what it held, this fork included).
		in.b.log.Error("Python zygote did not fork within the stub timeout; killing it", "model", in.model, "instance", in.name, "pid", zw.pgid)
		zw.kill()
		return nil, errUnhealthy(in.name)
	case <-ctx.Done():
		w.die(ctx.Err()) // the child, once forked, finds its socket closed and exits
		return nil, ctx.Err()
	}
	select {
	case <-ready:
	case <-w.exited:
		return nil, w.startError()
	case <-timer.C:
		w.kill()
		return nil, errUnhealthy(in.name)
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	}
	w.hasIsReady = hasIsReady
	w.log.Debug("forked the Python worker", "pid", w.pgid, "zygote", zw.pgid, "took", time.Since(began))
	if err := z.b.track(w); err != nil {
		return nil, err
	}
	return w, nil
}

// newChild makes a forked worker's side of its channels: the socket, the
// arena and the stdout/stderr pipes, whose reading has begun. files are
// the ends for the child, in the order the zygote expects (socket,
// stdout, stderr, arena); the caller closes them once sent.
func (z *zygote) newChild(in *instance) (*worker, []*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("fork Python worker %s: socketpair: %w", in.name, err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "inferd-worker"), os.NewFile(uintptr(fds[1]), "inferd-worker-child")
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		child.Close()
		return nil, nil, fmt.Errorf("fork Python worker %s: %w", in.name, err)
	}
	files := []*os.File{child}
	closeAll := func() {
		conn.Close()
		for _, f := range files {
			f.Close()
		}
	}
	log := in.b.log.With("model", in.model, "instance", in.name)
	w := newWorker(in.name, log, conn)
	fk := &forked{w: w, reply: make(chan forkReply, 1), copied: make(chan struct{})}
	w.fork = fk
	var writers []*logWriter
	for _, stream := range []string{"stdout", "stderr"} {
		r, wr, err := os.Pipe()
		if err != nil {
			closeAll()
			for _, f := range fk.outs {
				f.Close()
			}
			return nil, nil, fmt.Errorf("fork Python worker %s: %w", in.name, err)
		}
		files = append(files, wr)
		fk.outs = append(fk.outs, r)
		lw := &logWriter{log: log, stream: stream}
		if stream == "stderr" {
			lw.tail = w.stderr
		}
		writers = append(writers, lw)
	}
	if n := in.b.opts.ArenaBytes; n > 0 {
		f, mem, err := newArena(2 * n)
		if err != nil {
			closeAll()
			for _, f := range fk.outs {
				f.Close()
			}
			return nil, nil, fmt.Errorf("fork Python worker %s: %w", in.name, err)
		}
		w.arena = mem
		files = append(files, f)
	}
	var wg sync.WaitGroup
	for i, r := range fk.outs {
		wg.Go(func() {
			_, _ = io.Copy(writers[i], r)
			writers[i].flush()
		})
	}
	go func() {
		wg.Wait()
		close(fk.copied)
	}()
	return w, files, nil
}

// end marks the forked worker reaped, with status: what waits on it
// goes on. Its output is read to its end, for waitDelay at most (a child
// of the model may hold it).
func (fk *forked) end(status string) {
	fk.once.Do(func() {
		w := fk.w
		fk.status = status
		w.die(fmt.Errorf("exited: %s", status))
		w.killGroup()
		select {
		case <-fk.copied:
		case <-time.After(waitDelay):
		}
		for _, f := range fk.outs {
			f.Close()
		}
		<-fk.copied
		w.freeArena()
		close(w.exited)
	})
}

// sendFiles writes one frame with files attached (SCM_RIGHTS).
func (w *worker) sendFiles(header any, files []*os.File) error {
	uc, ok := w.conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("the zygote's connection is a %T", w.conn)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	frame := binary.LittleEndian.AppendUint64(nil, uint64(4+len(h)))
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(h)))
	frame = append(frame, h...)
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	w.wlock <- struct{}{}
	n, _, err := uc.WriteMsgUnix(frame, unix.UnixRights(fds...), nil)
	if err == nil && n < len(frame) {
		_, err = uc.Write(frame[n:])
	}
	<-w.wlock
	if err != nil {
		w.die(err)
	}
	return err
}
