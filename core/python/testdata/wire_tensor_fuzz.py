# The Python side of FuzzWireTensor: reads descriptors and frames from
# stdin (u32 length + JSON descriptor, u32 length + frame bytes), builds
# each with triton_python_backend_utils._wire_tensor as the worker does,
# and answers one line per frame: "ok <nbytes>", "err <message>" for a
# refusal, or "bug <text>" for any other exception.
import json
import struct
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

inp = sys.stdin.buffer
out = sys.stdout


def read(n):
    b = inp.read(n)
    if len(b) != n:
        sys.exit(0)
    return b


while True:
    (hlen,) = struct.unpack("<I", read(4))
    desc = json.loads(read(hlen))
    (flen,) = struct.unpack("<I", read(4))
    frame = memoryview(bytearray(read(flen)))
    try:
        t = pb_utils._wire_tensor(desc, frame, None)
        if t.triton_dtype() == 14:
            n = len(t._raw)
        elif t.triton_dtype() == 13:
            n = sum(4 + len(x) for x in t.as_numpy().reshape(-1))
        else:
            n = t.as_numpy().nbytes
        if list(t.as_numpy().shape if t.triton_dtype() != 14 else t.shape()) != desc["shape"]:
            raise AssertionError("shape %s for %s" % (t.shape(), desc["shape"]))
        out.write("ok %d\n" % n)
    except pb_utils.TritonModelException as e:
        out.write("err %s\n" % str(e).replace("\n", " "))
    except BaseException as e:  # noqa: B902
        out.write("bug %s: %s\n" % (type(e).__name__, str(e).replace("\n", " ")))
    out.flush()
