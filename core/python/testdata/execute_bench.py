# The worker's own CPU per execute, without a server: a small identity
# request (FP32 [1,16]) as the server frames it, run through the worker
# script of the shim folder given (its module functions, not its main
# loop), on the main thread's CPU clock, the best of 15 runs of N.
#
#   /usr/bin/python3 core/python/testdata/execute_bench.py core/python/shim [N]
#
# execute: decode the header, build the request, run the model, encode
# and write the answer; read+execute: the same, the frame read from the
# socket first. BENCHMARKS.md "Python backend" compares two shims this way.
# TestExecuteBenchScript runs it with a small N.
import os
import socket
import struct
import sys
import threading
import time

null3, null4 = os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_RDONLY)
assert (null3, null4) == (3, 4), (null3, null4)  # fd 4 empty: no arena
ours, theirs = socket.socketpair()
os.dup2(theirs.fileno(), 3)
sys.path.insert(0, sys.argv[1])
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000

import inferd_python_worker as w  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


class Identity:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]


w._State.model = Identity()
w._State.instance = "identity_0"


def drain():
    buf = bytearray(1 << 16)
    while ours.recv_into(buf):
        pass


threading.Thread(target=drain, daemon=True).start()
data = bytes(64)
hdr = (b'{"op":"execute","seq":1,"slot":0,"verbose":0,"requests":[{"rid":5,"id":"","correlation_id":0,"flags":0,'
       b'"timeout_us":0,"parameters":"{}","requested_outputs":[],"inputs":[{"name":"INPUT0","datatype":"FP32",'
       b'"shape":[1,16],"off":0,"len":64}]}]}')
frame = struct.pack("<QI", 4 + len(hdr) + len(data), len(hdr)) + hdr + data


def execute():
    blobs = memoryview(data)
    for _ in range(N):
        w._execute(w._decode(hdr.decode()), blobs)


def read_execute():
    for _ in range(N):
        ours.sendall(frame)
        header, blobs = w._next_work()
        w._run_model_code(w._execute, header, blobs)


for name, fn in (("execute", execute), ("read+execute", read_execute)):
    best = None
    for _ in range(15):
        t = time.thread_time_ns()
        fn()
        dt = time.thread_time_ns() - t
        best = dt if best is None else min(best, dt)
    print("%s %.2f µs" % (name, best / N / 1000))
