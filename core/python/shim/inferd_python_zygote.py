# inferd's Python zygote (FORK_INSTANCES, an inferd extension): a worker
# that has imported its model and run initialize once, then forks one
# worker per instance. Each child gets its own socket, arena and
# stdout/stderr, passed by the server with the fork command (SCM_RIGHTS),
# and then serves as a plain worker. The zygote reaps its children and
# tells the server how each ended. Only the main thread runs when it forks.

import array
import ctypes
import gc
import os
import select
import signal
import socket
import struct
import sys
import threading
import traceback

_PR_SET_PDEATHSIG = 1
_MAX_FDS = 8


def become(w, done):
    """Turns worker module w, whose model has just initialized, into the
    zygote. It returns only when the model left threads of its own: the
    worker then serves as a plain worker (the server stops it)."""
    threads = _quiesce(w)
    done["threads"] = threads
    if threads:
        w._start_helper()
        w._write("init_done", done)
        return
    if w._rpos[0] != w._rpos[1] or w._main:
        raise RuntimeError("the server sent work before the zygote was ready")
    w._write("init_done", done)
    _Zygote(w).run()


def _quiesce(w):
    """Ends the worker's own threads (the helper, an async initialize's
    event loop) and names those left: the model's, which make a fork
    unsafe."""
    w._helper_stop[0] = True
    w._helper_on.set()
    os.write(w._wake_w, b"x")
    w._helper_thread[0].join(5)
    w._helper_on.clear()
    st = w._State
    if st.loop is not None:
        st.loop.call_soon_threadsafe(st.loop.stop)
        st.loop_thread.join(5)
        if not st.loop_thread.is_alive():
            st.loop.close()
            st.loop = None
    return [t.name for t in threading.enumerate() if t is not threading.main_thread()]


def _status(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return "killed by signal " + signal.Signals(sig).name
        except ValueError:
            return "killed by signal %d" % sig
    return "exit status %d" % os.waitstatus_to_exitcode(status)


class _Zygote:
    def __init__(self, w):
        self.w = w
        self.children = set()
        # SIGCHLD wakes the loop through a pipe (a handler must not write
        # frames: it could interrupt a write of the main thread).
        self.sig_r, self.sig_w = os.pipe()
        os.set_blocking(self.sig_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.sig_w)
        # The children share the model's objects copy-on-write: the cyclic
        # collector must not touch them (Python docs, gc.freeze).
        gc.disable()

    def run(self):
        sock = self.w._sock
        while True:
            ready, _, _ = select.select([sock, self.sig_r], [], [])
            if self.sig_r in ready:
                os.read(self.sig_r, 4096)
                self.reap(os.WNOHANG)
            if sock in ready:
                header, fds = self.read_frame()
                op = header.get("op")
                if op == "fork":
                    self.fork(header, fds)
                    continue
                for fd in fds:
                    os.close(fd)
                if op == "finalize":
                    # The zygote ran no model code but initialize: its
                    # children finalize. It goes once they have exited.
                    while self.children:
                        self.reap(0)
                    self.w._write("finalize_done", {})
                    os._exit(0)

    def reap(self, flags):
        for pid in list(self.children):
            try:
                got, status = os.waitpid(pid, flags)
            except ChildProcessError:
                got, status = pid, 0
            if got == 0:
                continue
            self.children.discard(pid)
            self.w._write("exited", {"pid": pid, "status": _status(status)})
            if flags == 0:
                return

    def recv(self, n, fds):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            m, anc, flags, _ = self.w._sock.recvmsg_into(
                [view[got:]], socket.CMSG_SPACE(_MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC)
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(data[:len(data) - len(data) % a.itemsize])
                    fds.extend(a)
            if m == 0:
                os._exit(0)  # the server is gone: the children go with us
            if flags & socket.MSG_CTRUNC:
                raise RuntimeError("too many descriptors with a fork command")
            got += m
        return buf

    def read_frame(self):
        fds = []
        (length,) = struct.unpack("<Q", self.recv(8, fds))
        if length < 4 or length > 1 << 20:
            raise RuntimeError("zygote: a frame of %d bytes" % length)
        frame = self.recv(length, fds)
        (hlen,) = struct.unpack_from("<I", frame, 0)
        return self.w._decode(str(memoryview(frame)[4:4 + hlen], "utf-8")), fds

    def fork(self, header, fds):
        want = 4 if header.get("arena") else 3
        if len(fds) != want:
            for fd in fds:
                os.close(fd)
            self.w._write("forked", {"seq": header["seq"], "error": "%d descriptors, want %d" % (len(fds), want)})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        zygote = os.getpid()
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            try:
                self.child(zygote, header, fds)
            except BaseException:  # noqa: B902 — the child must not return into the zygote
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(70)
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        self.w._write("forked", {"seq": header["seq"], "pid": pid})

    def child(self, zygote, header, fds):
        os.setpgid(0, 0)
        _die_with_parent()
        if os.getppid() != zygote:
            os._exit(71)  # the zygote died before the child could follow it
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.sig_r)
        os.close(self.sig_w)
        w = self.w
        # Its own stdout, stderr, socket (fd 3) and arena (fd 4): the
        # socket object on fd 3 reads the new socket from now on.
        # A received descriptor is never 1, 2 or 3 (the zygote holds
        # those); one may be 4, the last target.
        targets = (3, 1, 2, 4)[:len(fds)]
        for fd, target in zip(fds, targets):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in targets:
                os.close(fd)
        os.close(w._wake_r)
        os.close(w._wake_w)
        w._wake_r, w._wake_w = os.pipe()
        w._rpos[0] = w._rpos[1] = 0
        w._main.clear()
        w._waiting.clear()
        w._seq[0] = 0
        w._busy[0] = 0
        w._spin[0] = False
        w._worker.cancelled.clear()
        w._State.instance = header["instance"]
        w._worker.arena_in = w._worker.arena_out = None
        if header.get("arena"):
            w._map_arena()
        gc.enable()
        w._start_helper()
        w._write("ready", {"python": sys.version.split()[0], "forked": True})
        w._serve()
        os._exit(0)


_libc = ctypes.CDLL(None, use_errno=True)  # loaded once, in the zygote


def _die_with_parent():
    """The child dies with the zygote (which dies with the server), as
    the server's own workers die with it (Pdeathsig)."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
