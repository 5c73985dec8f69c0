# Checks of inferd_python_worker.py's own parts that need no server: its
# header encoder and decoder against json's, and the policy of polling the
# socket after a reply. Run by TestWorkerModule with the shim on the path.
import json
import os
import socket
import threading
import time

# The worker speaks on fd 3 and maps an arena on fd 4 when one is there:
# fds 3 and 4 are taken first (fd 4 by an empty file: no arena), so that
# the socketpair is above them, and fd 3 then becomes one end of it.
null3, null4 = os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_RDONLY)
assert (null3, null4) == (3, 4), (null3, null4)
ours, theirs = socket.socketpair()
os.dup2(theirs.fileno(), 3)

import inferd_python_worker as w  # noqa: E402

# The header encoder writes what json.dumps writes compactly.
for obj in [
    {"op": "execute_done", "seq": 1, "responses": [{"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16], "off": 0, "len": 64}], "parameters": "{}"}]},
    {"op": "execute_done", "seq": 2, "responses": [None, {"error": {"code": 3, "message": "bad \"x\" \u00e9 \u2028 <&>\n"}}], "reschedule": [1]},
    {"op": "log", "message": "\x00\x1f\ud83d\ude00", "level": 2, "flag": True, "none": None, "f": 1.5, "big": 1 << 70},
    {"op": "bls", "seq": 3, "request": {"inputs": [], "parameters": "{\"k\": 1}", "flags": False}},
]:
    assert w._encode(obj) == json.dumps(obj, separators=(",", ":")), (w._encode(obj), json.dumps(obj, separators=(",", ":")))
for bad in [{"x": object()}, {"x": {1, 2}}]:
    try:
        w._encode(bad)
    except TypeError as e:
        assert "is not JSON serializable" in str(e), e
    else:
        raise AssertionError("encoded %r" % bad)

# The header decoder reads what json.loads reads, and fails where it fails.
for text in ['{"op":"execute","seq":1,"requests":[]}', ' {"op": "x"} ', '{"a":"\\u00e9\\n","b":[1,2.5,null,true]}', "[]"]:
    assert w._decode(text) == json.loads(text), text
for text in ["", "{", '{"a":1} x', "nope"]:
    try:
        w._decode(text)
    except ValueError:
        pass
    else:
        raise AssertionError("decoded %r" % text)

# Polling after a reply: off at first; a wait shorter than _SPIN_NS turns
# it on; a poll that finds nothing in time turns it off, and the bytes
# still arrive.
assert w._spin[0] is False
# The wait is short, but a loaded machine may deschedule the worker for
# longer than _SPIN_NS in the middle of it: a few tries, each a wait that
# should turn polling on.
for _ in range(20):
    w._spin[0] = False
    ours.sendall(b"abc")
    time.sleep(0.01)
    w._fill()
    assert bytes(w._rbuf[w._rpos[0]:w._rpos[1]]) == b"abc", w._rpos
    w._rpos[0] = w._rpos[1] = 0
    if w._spin[0]:
        break
assert w._spin[0] is True
w._rpos[0] = w._rpos[1] = 0
timer = threading.Timer(0.05, ours.sendall, (b"defg",))
timer.start()
w._fill()
assert bytes(w._rbuf[w._rpos[0]:w._rpos[1]]) == b"defg", w._rpos
assert w._spin[0] is False
w._rpos[0] = w._rpos[1] = 0
# While polling is on, bytes that come within the poll are read by it.
w._spin[0] = True
timer = threading.Timer(0.00005, ours.sendall, (b"h",))
timer.start()
w._fill()
timer.join()
assert bytes(w._rbuf[w._rpos[0]:w._rpos[1]]) == b"h"
w._rpos[0] = w._rpos[1] = 0
# After a yield found the CPU busy, even short waits leave polling off.
w._rest_until[0] = time.perf_counter_ns() + 10 * 10**9
w._spin[0] = False
ours.sendall(b"i")
time.sleep(0.01)
w._fill()
assert bytes(w._rbuf[w._rpos[0]:w._rpos[1]]) == b"i"
assert w._spin[0] is False
print("ok")
