# inferd's Python worker: one process per model instance. It speaks the
# framed protocol of inferd's python-backend design on fd 3 (stdout and
# stderr stay the model's), runs the model's methods on its main thread one
# at a time, and serves replies, cancellations and readiness checks from a
# reader thread.

import asyncio
import collections
import importlib
import inspect
import json
import mmap
import os
import queue
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

import numpy as np

import inferd_python_results as _results
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _worker, _Blobs

signal.signal(signal.SIGINT, signal.SIG_IGN)

_sock = socket.socket(fileno=3)


def _map_arena():
    """The server's shared arena (fd 4), if it gave one: large execute
    inputs are read in place from its first half, large outputs written to
    its second."""
    try:
        size = os.fstat(4).st_size
    except OSError:
        return
    if size <= 0:
        return
    mm = mmap.mmap(4, size)
    view = memoryview(mm)
    _worker.arena_in, _worker.arena_out = view[:size // 2], view[size // 2:]
    _arena_in_addr[0] = np.frombuffer(_worker.arena_in, dtype=np.uint8).ctypes.data


_arena_in_addr = [0]  # where the input half is mapped


_map_arena()
_write_lock = threading.Lock()
_seq_lock = threading.Lock()
_seq = [0]
_waiting = {}  # seq -> queue of (header, frame)
_main = collections.deque()  # work the helper read for the main thread


def _read_exact(view):
    got = 0
    while got < len(view):
        n = _sock.recv_into(view[got:])
        if n == 0:
            os._exit(0)  # the server is gone
        got += n


# The headers' JSON codec (inferd_python_codec.py).
from inferd_python_codec import _decode, _encode  # noqa: E402

# Frames are read through a buffer: a small frame and the length before it
# come in one system call, then are copied out (tensors may outlive the
# next read). Only the thread holding _read_lock reads.
_rbuf = bytearray(1 << 16)
_rview = memoryview(_rbuf)
_rpos = [0, 0]  # start and end of the unread bytes in _rbuf


def _take(n):
    """The next n bytes of the stream, in a bytearray of their own."""
    start, end = _rpos
    out = bytearray(n)
    have = min(n, end - start)
    out[:have] = _rview[start:start + have]
    start += have
    if have < n:
        if n - have >= len(_rbuf):
            _read_exact(memoryview(out)[have:])  # large: straight into place
        else:
            got = have
            while got < n:
                m = _sock.recv_into(_rbuf)
                if m == 0:
                    os._exit(0)  # the server is gone
                k = min(n - got, m)
                out[got:got + k] = _rview[:k]
                got += k
                start, end = k, m
            _rpos[0], _rpos[1] = start, end
            return out
    if start == end:
        start = end = 0
    _rpos[0], _rpos[1] = start, end
    return out


_length = struct.Struct("<Q").unpack_from
_header_length = struct.Struct("<I").unpack_from


def _read_frame():
    start, end = _rpos
    if end - start >= 8:
        (length,) = _length(_rbuf, start)  # read in place: no copy of its own
        _rpos[0] = start + 8
    else:
        (length,) = _length(_take(8))
    frame = _take(length)
    (hlen,) = _header_length(frame, 0)
    header = _decode(str(memoryview(frame)[4:4 + hlen], "utf-8"))
    return header, memoryview(frame)[4 + hlen:]


def _write(op, header, blobs=None):
    # op and seq lead the header: the server routes a frame by them
    # without parsing the rest.
    header = {"op": op, **header}
    h = _encode(header).encode("utf-8")
    size = blobs.size if blobs is not None else 0
    head = struct.pack("<QI", 4 + len(h) + size, len(h)) + h
    with _write_lock:
        if size <= 65536:
            # One system call for the frame: a small one's parts are joined.
            _sock.sendall(b"".join([head] + (blobs.parts if blobs is not None else [])) if size else head)
            return
        _sock.sendall(head)
        for part in blobs.parts:
            _sock.sendall(part)


def _next_seq():
    with _seq_lock:
        _seq[0] += 1
        return _seq[0]


def _call(op, header, blobs):
    _listen()
    seq = _next_seq()
    q = queue.Queue()
    _waiting[seq] = q
    try:
        _write(op, {"seq": seq, **header}, blobs)
        return q.get()
    finally:
        _waiting.pop(seq, None)


class _Stream:
    def __init__(self, op, header, blobs):
        _listen()
        self.seq = _next_seq()
        self.q = queue.Queue()
        _waiting[self.seq] = self.q
        _write(op, {"seq": self.seq, **header}, blobs)

    def next(self):
        _listen()
        reply, frame = self.q.get()
        if reply.get("final"):
            _waiting.pop(self.seq, None)
        return reply, frame

    def cancel(self):
        _write("bls_cancel", {"seq": self.seq})


def _tensor(desc, frame):
    """A Tensor over its bytes in the received frame or the arena, without
    a copy; a malformed description raises TritonModelException."""
    return pb_utils._wire_tensor(desc, frame, _worker.arena_in)


_worker.call = _call
_worker.notify = _write
_worker.stream = _Stream
_worker.tensor = _tensor


# Reading the socket: while the main thread waits for work it reads the
# frames itself, so a request reaches the model without a thread handoff.
# While it runs model code nobody reads, unless something needs it: a call
# that waits for a reply (BLS, a sender's send, metrics), is_cancelled(), or
# model code running longer than _LONG seconds (readiness checks and cancel
# notices must get through). Then a helper thread reads, and gives the
# socket back when the model code returns: a pipe wakes it from its wait.
# Waking the helper for every execute cost about 40 µs a request (its
# thread and the GIL handed to and fro), so it sleeps unless needed.
_LONG = 0.05
_IDLE_LOOK = 1.0
_read_lock = threading.Lock()
_helper_on = threading.Event()
_helper_stop = [False]  # set to end the helper (a zygote forks with one thread)
_helper_thread = [None]
_busy_lock = threading.Lock()
_busy = [0]  # the number of the model code run in progress; 0: none
_wake_r, _wake_w = os.pipe()


def _listen():
    """Has the helper read the socket if model code is running (the main
    thread reads it otherwise). Any thread may call it."""
    if _helper_on.is_set():
        return
    with _busy_lock:
        if _busy[0]:
            _helper_on.set()


_worker.listen = _listen


def _route(header, frame):
    """Handles a frame that is not work for the main thread; False if it is."""
    op = header["op"]
    if op in ("reply", "bls_response"):
        q = _waiting.get(header.get("seq"))
        if q is not None:
            q.put((header, frame))
    elif op == "cancel":
        _worker.cancelled.update(header["rids"])
    elif op == "is_ready":
        threading.Thread(target=_is_ready, args=(header["seq"],), daemon=True).start()
    else:
        return False
    return True


def _helper():
    seen = 0
    while True:
        # While the worker idles, look once a second (a run that starts
        # meanwhile is noticed within about a second, well inside a
        # readiness check's 5 s); while model code runs, every _LONG.
        if not _helper_on.wait(_LONG if seen else _IDLE_LOOK):
            # Model code that runs for two looks in a row is long.
            with _busy_lock:
                if _busy[0] and _busy[0] == seen:
                    _helper_on.set()
                seen = _busy[0]
            continue
        if _helper_stop[0]:
            return
        with _read_lock:
            while _helper_on.is_set():
                if _helper_stop[0]:
                    return
                if _rpos[0] == _rpos[1]:  # nothing buffered: wait for the socket
                    ready, _, _ = select.select([_sock, _wake_r], [], [])
                    if _wake_r in ready:
                        os.read(_wake_r, 4096)
                        continue
                header, frame = _read_frame()
                if not _route(header, frame):
                    _main.append((header, frame))


# Waiting for work: a worker that sleeps in recv is woken by the server's
# next frame, and waking a process whose CPU went idle costs more than the
# whole of a small execute (tens of µs on a virtual machine). So while work
# comes back to back (the last wait was shorter than _SPIN_NS), the main
# thread polls the socket for up to _SPIN_NS before it sleeps, yielding
# its CPU between polls. A poll that finds nothing in time turns polling
# off until a wait is short again: an idle worker sleeps after at most one
# _SPIN_NS. A yield that let another task run (it took over _YIELDED_NS)
# means the CPU is wanted, not idle: polling then rests for _REST_NS.
_SPIN_NS = 200_000
_YIELDED_NS = 20_000
_REST_NS = 1_000_000_000
_spin = [False]
_rest_until = [0]


def _fill():
    """Waits until the socket has bytes and reads them into _rbuf (which is
    empty); polls first while work comes back to back."""
    start = time.perf_counter_ns()
    if _spin[0]:
        deadline = start + _SPIN_NS
        while True:
            try:
                m = _sock.recv_into(_rbuf, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                now = time.perf_counter_ns()
                if now >= deadline:
                    break
                os.sched_yield()
                if time.perf_counter_ns() - now > _YIELDED_NS:
                    _rest_until[0] = now + _REST_NS
                    break
                continue
            if m == 0:
                os._exit(0)  # the server is gone
            _rpos[0], _rpos[1] = 0, m
            return
    m = _sock.recv_into(_rbuf)
    if m == 0:
        os._exit(0)
    _rpos[0], _rpos[1] = 0, m
    end = time.perf_counter_ns()
    _spin[0] = end - start < _SPIN_NS and end >= _rest_until[0]


def _next_work():
    """The next frame for the main thread, reading the socket itself."""
    while True:
        if _main:
            return _main.popleft()
        with _read_lock:
            if _main:
                return _main.popleft()  # the helper read it meanwhile
            if _rpos[0] == _rpos[1]:
                _fill()
            header, frame = _read_frame()
        if not _route(header, frame):
            return header, frame


_runs = [0]


def _run_model_code(fn, *args):
    """Runs fn; the helper reads the socket meanwhile if needed."""
    _runs[0] += 1
    _busy[0] = _runs[0]
    try:
        return fn(*args)
    finally:
        with _busy_lock:
            _busy[0] = 0
            on = _helper_on.is_set()
            if on:
                _helper_on.clear()
        if on:
            os.write(_wake_w, b"x")


class _State:
    model = None
    instance = ""
    model_file = ""
    decoupled = False
    loop = None
    loop_thread = None


def _loop():
    if _State.loop is None:
        _State.loop = asyncio.new_event_loop()
        _State.loop_thread = threading.Thread(target=_State.loop.run_forever, daemon=True)
        _State.loop_thread.start()
    return _State.loop


def _start_helper():
    _helper_stop[0] = False
    _helper_thread[0] = threading.Thread(target=_helper, daemon=True)
    _helper_thread[0].start()


def _run(result):
    """The value of result, running it to completion if it is a coroutine."""
    if inspect.iscoroutine(result):
        return asyncio.run_coroutine_threadsafe(result, _loop()).result()
    return result


def _error_text(exc):
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _import(model_file, version):
    version_dir = os.path.dirname(model_file)
    model_dir = os.path.dirname(version_dir)
    for d in (version_dir, model_dir):
        if d not in sys.path:
            sys.path.append(d)
    _worker.model_dir = version_dir
    stem = os.path.splitext(os.path.basename(model_file))[0]
    module = importlib.import_module(os.path.basename(version_dir) + "." + stem)
    return module.TritonPythonModel


def _auto_complete(header):
    try:
        _worker.phase = "auto_complete"
        cls = _import(header["model_file"], header["model_version"])
        config = pb_utils.ModelConfig(json.loads(header["config"]))
        fn = getattr(cls, "auto_complete_config", None)
        if fn is not None:
            config = fn(config)
            if not isinstance(config, pb_utils.ModelConfig):
                name = json.loads(header["config"]).get("name", "")
                raise pb_utils.TritonModelException(
                    "auto_complete_config function in model '" + name + "' must return a valid pb.ModelConfig object.")
        _write("auto_complete_done", {"config": json.dumps(config.as_dict())})
    except BaseException as exc:  # noqa: B902 — any failure fails the load
        _write("auto_complete_done", {"error": _error_text(exc)})


def _init(header):
    try:
        _worker.phase = "initialize"
        _worker.log_verbose = header.get("log_verbose", 0)
        _State.instance = header["args"]["model_instance_name"]
        _State.model_file = header["model_file"]
        _State.decoupled = header["decoupled"]
        cls = _import(header["model_file"], header["model_version"])
        _State.model = cls()
        init = getattr(_State.model, "initialize", None)
        if init is not None:
            _run(init(header["args"]))
        _worker.phase = "execute"
        return {"has_is_ready": hasattr(_State.model, "is_ready")}
    except BaseException as exc:  # noqa: B902
        return {"error": _error_text(exc)}


def _is_ready(seq):
    try:
        ready = _run(_State.model.is_ready())
        if not isinstance(ready, bool):
            raise pb_utils.TritonModelException("is_ready() must return a boolean value")
        _write("is_ready_done", {"seq": seq, "ready": ready})
    except BaseException as exc:  # noqa: B902
        _write("is_ready_done", {"seq": seq, "error": _error_text(exc)})


def _batch_error(text):
    return "Failed to process the request(s) for model '" + _State.instance + "', message: " + text


_SLOTS = 2  # the server's depth: executions in flight per worker


def _received(r, frame):
    """The InferenceRequest the model gets for one request of an execute."""
    inputs = [_tensor(d, frame) for d in r["inputs"]]
    return pb_utils.InferenceRequest._received(
        r["rid"], r["id"], r["correlation_id"], r["flags"], r["timeout_us"],
        r["parameters"], r["requested_outputs"], inputs, _State.decoupled)


def _execute(header, frame):
    _worker.log_verbose = header.get("verbose", _worker.log_verbose)
    # A request the worker cannot build (a malformed tensor) is answered
    # with its own error; the others still run.
    requests = []
    answers = []  # per request: its error response, or None when it runs
    for r in header["requests"]:
        try:
            requests.append(_received(r, frame))
            answers.append(None)
        except Exception as exc:  # noqa: B902 — this request fails, not the batch
            answers.append({"error": {"code": int(pb_utils.TritonError.INVALID_ARG), "message": _batch_error(_error_text(exc))}})
    if not requests:
        _write("execute_done", {"seq": header["seq"], "responses": answers})
        return
    blobs = _Blobs()
    if _worker.arena_out is not None:
        # The server splits the arena between the executions it may have
        # in flight (its slots); this one's outputs go to its own part.
        part = len(_worker.arena_out) // _SLOTS
        base = header.get("slot", 0) * part
        blobs = _Blobs(_worker.arena_out[base:base + part], base, (_arena_in_addr[0] + base, part))
    try:
        execute = getattr(_State.model, "execute", None)
        if execute is None:
            raise pb_utils.TritonModelException(
                "Python model " + _State.model_file + " does not implement `execute` method.")
        if _State.decoupled and inspect.iscoroutinefunction(execute):
            # Decoupled: the coroutine runs on the loop, the next batch may start.
            future = asyncio.run_coroutine_threadsafe(execute(requests), _loop())
            future.add_done_callback(lambda f, reqs=requests: _async_done(f, reqs))
            result = None
        else:
            result = _run(execute(requests))
        responses = _check_result(result, requests, blobs)
    except BaseException as exc:  # noqa: B902
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stderr.write(text)
        for r in requests:
            r._closed = True
        if len(requests) == len(answers):
            _write("execute_done", {"seq": header["seq"], "error": _batch_error(_error_text(exc))})
            return
        # Some requests already failed on their own: each gets its error.
        failed = {"error": {"code": int(pb_utils.TritonError.INTERNAL), "message": _batch_error(_error_text(exc))}}
        _write("execute_done", {"seq": header["seq"], "responses": [a or failed for a in answers]})
        return
    if len(requests) != len(answers):
        it = iter(responses)
        responses = [a if a is not None else next(it) for a in answers]
    done = {"seq": header["seq"], "responses": responses}
    # Requests released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, by
    # their index in the execute: the server runs them again.
    built = iter(requests)
    rescheduled = [i for i, a in enumerate(answers)
                   if a is None and next(built)._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE]
    if rescheduled:
        done["reschedule"] = rescheduled
    _write("execute_done", done, blobs)


def _async_done(future, requests):
    """Ends the requests of a decoupled async execute that raised: the
    exception is logged and each request still open gets it as its final
    error response (Triton only logs it, and the client waits forever)."""
    if future.cancelled():
        exc = asyncio.CancelledError("the execute coroutine was cancelled")
    else:
        exc = future.exception()
    if exc is None:
        return  # the model may still send from its own threads
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    error = pb_utils.InferenceResponse(error=pb_utils.TritonError(_batch_error(_error_text(exc))))
    for r in requests:
        try:
            r._send(error, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:  # noqa: B902 — already closed, or the client went away
            pass


def _check_result(result, requests, blobs):
    return _results.check(result, requests, blobs, _State.decoupled, _State.instance)


def _finalize():
    _worker.phase = "finalize"
    try:
        fin = getattr(_State.model, "finalize", None)
        if fin is not None:
            _run(fin())
    except BaseException:  # noqa: B902 — logged only
        traceback.print_exc()
    _write("finalize_done", {})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    _start_helper()
    _write("ready", {"python": sys.version.split()[0], "numpy": np.__version__})
    _serve()


def _serve():
    while True:
        header, frame = _next_work()
        op = header["op"]
        if op == "auto_complete":
            _run_model_code(_auto_complete, header)
        elif op == "init":
            done = _run_model_code(_init, header)
            if header.get("zygote") and "error" not in done:
                # FORK_INSTANCES: this worker becomes its model's zygote
                # (inferd_python_zygote.py), unless the model left threads.
                import inferd_python_zygote
                inferd_python_zygote.become(sys.modules[__name__], done)
                continue  # refused: it serves on as a plain worker
            _write("init_done", done)
        elif op == "execute":
            try:
                _run_model_code(_execute, header, frame)
            except Exception:  # noqa: B902 — a malformed execute must not end the worker
                traceback.print_exc()
                if "seq" in header:
                    _write("execute_done", {"seq": header["seq"], "error": _batch_error("malformed execute message")})
        elif op == "finalize":
            _busy[0] = -1  # finalize may still make calls; the worker exits after
            _finalize()


if __name__ == "__main__":
    main()
