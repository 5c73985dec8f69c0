# inferd's triton_python_backend_utils: the module Triton Python models
# import, written for inferd to the API of triton-inference-server/
# python_backend (README.md, src/pb_stub.cc,
# src/resources/triton_python_backend_utils.py). The worker
# (inferd_python_worker.py) connects it to the server through the hooks in
# _worker; everything else is plain Python over numpy.

import enum
import json
import os
import struct
import sys
import threading

import numpy as np

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class MemoryType(enum.IntEnum):
    TRITONSERVER_MEMORY_CPU = 0
    TRITONSERVER_MEMORY_CPU_PINNED = 1
    TRITONSERVER_MEMORY_GPU = 2


TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU
TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU


# The worker sets these when it connects.
class _Worker:
    call = None  # call(op, header, blobs) -> (header, blobs): a request that expects a reply
    notify = None  # notify(op, header): a message without reply
    phase = "import"  # import, initialize, execute, finalize, auto_complete
    arena_in = None  # the shared arena's halves, when the server gave one
    arena_out = None
    model_dir = None
    log_verbose = 0
    cancelled = set()
    listen = None  # listen(): make sure the socket is read while model code runs


_worker = _Worker()


class TritonModelException(Exception):
    pass


class TritonError:
    class Code(enum.IntEnum):
        UNKNOWN = 0
        INTERNAL = 1
        NOT_FOUND = 2
        INVALID_ARG = 3
        UNAVAILABLE = 4
        UNSUPPORTED = 5
        ALREADY_EXISTS = 6
        CANCELLED = 7

    UNKNOWN = Code.UNKNOWN
    INTERNAL = Code.INTERNAL
    NOT_FOUND = Code.NOT_FOUND
    INVALID_ARG = Code.INVALID_ARG
    UNAVAILABLE = Code.UNAVAILABLE
    UNSUPPORTED = Code.UNSUPPORTED
    ALREADY_EXISTS = Code.ALREADY_EXISTS
    CANCELLED = Code.CANCELLED

    def __init__(self, message, code=Code.INTERNAL):
        if message is None:
            raise TypeError("TritonError message must be a string")
        self._message = str(message)
        self._code = TritonError.Code(int(code))

    def message(self):
        return self._message

    def code(self):
        return self._code

    def __repr__(self):
        return "TritonError(%r, %s)" % (self._message, self._code.name)


# Datatypes: protocol name, Triton enum code, numpy dtype.
_DTYPES = [
    ("BOOL", 1, np.bool_),
    ("UINT8", 2, np.uint8),
    ("UINT16", 3, np.uint16),
    ("UINT32", 4, np.uint32),
    ("UINT64", 5, np.uint64),
    ("INT8", 6, np.int8),
    ("INT16", 7, np.int16),
    ("INT32", 8, np.int32),
    ("INT64", 9, np.int64),
    ("FP16", 10, np.float16),
    ("FP32", 11, np.float32),
    ("FP64", 12, np.float64),
    ("BYTES", 13, np.object_),
    ("BF16", 14, None),
]
_NAME_TO_CODE = {n: c for n, c, _ in _DTYPES}
_CODE_TO_NAME = {c: n for n, c, _ in _DTYPES}
_CODE_TO_NUMPY = {c: t for _, c, t in _DTYPES if t is not None}

TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def triton_to_numpy_type(data_type):
    return _CODE_TO_NUMPY.get(int(data_type))


_NUMPY_TO_CODE = {np.dtype(t): c for _, c, t in _DTYPES if t is not None and t is not np.object_}


def numpy_to_triton_type(data_type):
    try:
        dt = np.dtype(data_type)
    except TypeError:
        return None
    if dt == np.object_ or dt.type == np.bytes_:
        return 13
    code = _NUMPY_TO_CODE.get(dt)
    if code is None and dt.byteorder == ">":
        code = _NUMPY_TO_CODE.get(dt.newbyteorder("<"))
    return code


def triton_string_to_numpy(triton_type_string):
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def serialize_byte_tensor(input_tensor):
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    out = bytearray()
    for obj in np.nditer(input_tensor, flags=["refs_ok"], order="C"):
        item = obj.item()
        if input_tensor.dtype == np.object_ and not isinstance(item, bytes):
            item = str(item).encode("utf-8")
        out += struct.pack("<I", len(item))
        out += item
    return bytes(out)


def _bytes_elements(data, name):
    """The elements of a BYTES tensor's bytes, each a length and its bytes;
    framing that does not end exactly at the end raises."""
    buf = memoryview(data)
    items = []
    off = 0
    end = len(buf)
    while off < end:
        if end - off < 4:
            raise TritonModelException("tensor '%s': truncated BYTES element length at byte %d" % (name, off))
        (n,) = struct.unpack_from("<I", buf, off)
        off += 4
        if n > end - off:
            raise TritonModelException("tensor '%s': BYTES element of %d bytes at byte %d runs past the end of the tensor" % (name, n, off))
        items.append(bytes(buf[off:off + n]))
        off += n
    return items


# Received datatypes: name -> (code, numpy dtype, bytes per element; 0 for
# BYTES).
_WIRE_TYPES = {n: (c, t, 0 if c == 13 else 2 if c == 14 else np.dtype(t).itemsize) for n, c, t in _DTYPES}


def _wire_tensor(desc, frame, arena):
    """The Tensor a received descriptor names: its bytes in frame, or in
    arena when desc says so, used without a copy. A description that does
    not hold together (unknown datatype, negative dims, a shape that does
    not match the bytes, bytes outside the area) raises
    TritonModelException, so that only its request fails."""
    if not isinstance(desc, dict):
        raise TritonModelException("malformed tensor description")
    name = desc.get("name")
    if not isinstance(name, str) or name == "":
        raise TritonModelException("tensor description without a name")
    dtype = desc.get("datatype")
    kind = _WIRE_TYPES.get(dtype) if isinstance(dtype, str) else None
    if kind is None:
        raise TritonModelException("tensor '%s' has unknown datatype '%s'" % (name, dtype))
    code, np_type, itemsize = kind
    shape = desc.get("shape")
    if not isinstance(shape, list):
        raise TritonModelException("tensor '%s' has an invalid shape %s" % (name, shape))
    count = 1
    for d in shape:
        if type(d) is not int or d < 0:
            raise TritonModelException("tensor '%s' has an invalid shape %s" % (name, shape))
        count *= d  # Python integers: no overflow
    area = arena if desc.get("arena") else frame
    size = 0 if area is None else len(area)
    off, n = desc.get("off"), desc.get("len")
    if type(off) is not int or type(n) is not int or off < 0 or n < 0 or off + n > size:
        raise TritonModelException("tensor '%s' lies outside the frame (%s+%s of %d bytes)" % (name, off, n, size))
    data = area[off:off + n]
    try:
        if code == 13:
            items = _bytes_elements(data, name)
            if len(items) != count:
                raise TritonModelException("tensor '%s' of shape %s holds %d BYTES elements" % (name, shape, len(items)))
            arr = np.empty(len(items), dtype=np.object_)
            arr[:] = items
            return Tensor(name, arr.reshape(shape), code, shape)
        if count * itemsize != n:
            raise TritonModelException("tensor '%s' of shape %s and datatype %s holds %d bytes" % (name, shape, dtype, n))
        if code == 14:
            return Tensor(name, bytes(data), code, shape)
        return Tensor(name, np.frombuffer(data, dtype=np_type).reshape(shape), code, shape)
    except ValueError as e:  # numpy: too many dims, or too big a shape
        raise TritonModelException("tensor '%s' of shape %s: %s" % (name, shape, e))


def deserialize_bytes_tensor(encoded_tensor):
    buf = memoryview(encoded_tensor)
    items = []
    off = 0
    while off < len(buf):
        (n,) = struct.unpack_from("<I", buf, off)
        off += 4
        items.append(bytes(buf[off:off + n]))
        off += n
    arr = np.empty(len(items), dtype=np.object_)
    arr[:] = items
    return arr


class Tensor:
    """A named tensor: an input as received, or an output a model builds."""

    def __init__(self, name, data, dtype_code=None, shape=None):
        if not isinstance(name, str) or name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        self._name = name
        self._raw = None  # received bytes of a BF16 tensor
        if dtype_code is not None:  # built by the worker from received data
            self._code = dtype_code
            self._array = data
            self._shape = list(shape)
            if dtype_code == 14:
                self._raw, self._array = data, None
            return
        if not isinstance(data, np.ndarray):
            raise TritonModelException("Tensor data must be a numpy array.")
        # The numeric dtypes in native order are looked up at once.
        code = _NUMPY_TO_CODE.get(data.dtype)
        if code is None:
            code = numpy_to_triton_type(data.dtype)
        if code is None:
            raise TritonModelException("NumPy dtype is not supported.")
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        self._code = code
        self._array = data
        self._shape = list(data.shape)

    def name(self):
        return self._name

    def shape(self):
        return list(self._shape)

    def triton_dtype(self):
        return self._code

    def is_cpu(self):
        return True

    def as_numpy(self):
        if self._code == 14:
            raise TritonModelException("Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead.")
        return self._array

    # DLPack, through numpy (host memory only): a capsule of the tensor's
    # array, and a Tensor over another framework's CPU tensor.
    def _dlpack_array(self):
        if self._code == 13:
            raise TritonModelException("DLPack does not have support for string tensors.")
        if self._code == 14:
            raise TritonModelException("BF16 tensors cannot be exchanged through numpy's DLPack.")
        return self._array

    def to_dlpack(self):
        return self._dlpack_array().__dlpack__()

    @staticmethod
    def from_dlpack(name, dlpack_tensor):
        if not hasattr(dlpack_tensor, "__dlpack__"):
            raise TritonModelException("from_dlpack() needs an object with __dlpack__ (a PyCapsule alone is not accepted by numpy).")
        try:
            arr = np.from_dlpack(dlpack_tensor)
        except (TypeError, RuntimeError, BufferError) as e:
            raise TritonModelException("from_dlpack(): " + str(e))
        return Tensor(name, arr)

    def __dlpack__(self, stream=None):
        return self._dlpack_array().__dlpack__()

    def __dlpack_device__(self):
        return self._dlpack_array().__dlpack_device__()

    # Wire form: the datatype name and the bytes.
    def _wire(self):
        if self._code == 14:
            return "BF16", bytes(self._raw)
        name = _CODE_TO_NAME[self._code]
        if self._code == 13:
            data = serialize_byte_tensor(self._array)
            return name, b"" if data == () else data
        arr = self._array
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        # Flat first: memoryview.cast refuses a view with a 0 in its
        # shape, which a tensor of no elements ([0, 4]) has.
        return name, memoryview(np.ascontiguousarray(arr).reshape(-1)).cast("B")


class _Blobs:
    """The blob area of a frame being built: tensor bytes, in order. With
    an arena (execute's reply), large tensors are copied there instead."""

    def __init__(self, arena=None, base=0, inputs=None):
        self.parts = []
        self.size = 0
        self.arena = arena  # the part of the output half this frame may use
        self.base = base  # its offset in the output half
        self.arena_used = 0
        # inputs: the address and size of the execution's own part of the
        # input half. A large output that lies there (a view of an input,
        # as an identity returns) is described where it is, not copied.
        self.inputs = inputs

    def add(self, data):
        """Places data; returns its offset, its length and where it is:
        False (the blob area), True (the output half) or "in" (at the
        offset in the execution's part of the input half)."""
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            # cast refuses a 0 in the shape: an empty view is no bytes.
            mv = mv.cast("B") if mv.nbytes else memoryview(b"")
        n = len(mv)
        if self.inputs is not None and n >= 65536:
            start, size = self.inputs
            addr = np.frombuffer(mv, dtype=np.uint8).ctypes.data
            if start <= addr and addr + n <= start + size:
                return addr - start, n, "in"
        if self.arena is not None and n >= 65536 and self.arena_used + n <= len(self.arena):
            off = self.arena_used
            self.arena[off:off + n] = mv
            self.arena_used = (off + n + 63) & ~63
            return self.base + off, n, True
        off = self.size
        self.parts.append(mv)
        self.size += n
        return off, n, False


def _describe(t, blobs):
    dtype, data = t._wire()
    off, n, where = blobs.add(data)
    d = {"name": t.name(), "datatype": dtype, "shape": t.shape(), "off": off, "len": n}
    if where == "in":
        d["arena_in"] = True
    elif where:
        d["arena"] = True
    return d


def _check_parameters(parameters):
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise TritonModelException("Expect parameters to be a dict, found type %s" % type(parameters))
    for k, v in parameters.items():
        if not isinstance(k, str):
            raise TritonModelException("Expect parameters keys to have type str, found type %s" % type(k))
        if not isinstance(v, (bool, int, str)):
            raise TritonModelException("Expect parameters values to have type bool/int/str, found type %s" % type(v))
    return dict(parameters)


class InferenceResponse:
    def __init__(self, output_tensors=[], error=None, parameters=None):
        if output_tensors is None:
            raise TypeError("output_tensors must be a list of Tensor")
        tensors = list(output_tensors)
        for t in tensors:
            if t is None:
                raise TritonModelException("Output tensors cannot contain None.")
        self._tensors = tensors
        self._error = error
        self._parameters = _check_parameters(parameters)

    def output_tensors(self):
        return list(self._tensors)

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        if not self._parameters:
            return "{}"  # the usual case, without the encoder
        return json.dumps(self._parameters)


class InferenceResponseSender:
    def __init__(self, request):
        self._request = request

    def send(self, response=None, flags=0):
        self._request._send(response, flags)

    def is_cancelled(self):
        return self._request.is_cancelled()


class _Trace:
    """A received request's trace, as request.trace() gives it: passed to a
    BLS InferenceRequest, the call joins that request's trace as a child."""

    def __init__(self, rid=None):
        self._rid = rid

    def get_context(self, mode="opentelemetry"):
        return None


class PreferredMemory:
    def __init__(self, preferred_memory_type, preferred_device_id=0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceRequest:
    """A request: as execute receives it, or built by model code for BLS."""

    def __init__(self, request_id="", correlation_id=0, inputs=None, requested_output_names=None,
                 model_name=None, model_version=-1, flags=0, timeout=0,
                 preferred_memory=None, trace=None, parameters=None):
        for arg, value in (("inputs", inputs), ("requested_output_names", requested_output_names),
                           ("model_name", model_name), ("request_id", request_id),
                           ("correlation_id", correlation_id), ("model_version", model_version), ("flags", flags)):
            if value is None:
                raise TypeError("InferenceRequest argument '%s' must not be None" % arg)
        if isinstance(model_name, (bytes, np.bytes_)):
            model_name = bytes(model_name).decode("utf-8")
        if not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        if isinstance(correlation_id, int):
            correlation_id = int(correlation_id)  # a bool or IntEnum: the number, as Triton's stub casts it
        for t in inputs:
            if t is None:
                raise TritonModelException("Input tensors cannot contain None.")
        self._id = request_id
        self._correlation_id = correlation_id
        self._inputs = list(inputs)
        self._requested = list(requested_output_names)
        self._model_name = model_name
        self._model_version = int(model_version)
        self._flags = int(flags)
        self._timeout = int(timeout)
        self._parameters = _check_parameters(parameters)
        self._trace = trace
        self._rid = None  # set for requests the server sent

    # Received requests are built by the worker through this.
    @classmethod
    def _received(cls, rid, request_id, correlation_id, flags, timeout, parameters_json, requested, inputs, decoupled):
        r = cls.__new__(cls)
        r._id, r._correlation_id, r._flags, r._timeout = request_id, correlation_id, flags, timeout
        r._parameters_json = parameters_json
        r._requested = set(requested)
        r._inputs = inputs
        r._rid = rid
        r._decoupled = decoupled
        r._lock = threading.Lock()
        r._responded = False  # a response went through the sender
        r._closed = False  # FINAL sent, or the batch failed
        r._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        return r

    def inputs(self):
        return list(self._inputs)

    def requested_output_names(self):
        if self._rid is None:
            return list(self._requested)
        return set(self._requested)

    def request_id(self):
        return self._id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def timeout(self):
        return self._timeout

    def parameters(self):
        if self._rid is None:
            return json.dumps(self._parameters)
        return self._parameters_json

    def trace(self):
        return _Trace(self._rid)

    def model_name(self):
        return self._model_name

    def is_cancelled(self):
        if _worker.listen is not None:
            _worker.listen()  # cancel notices arrive on the socket
        return self._rid is not None and self._rid in _worker.cancelled

    def get_response_sender(self):
        if self._rid is None:
            raise TritonModelException("Response sender is only available for requests the model received.")
        return InferenceResponseSender(self)

    def set_release_flags(self, flags):
        self._release_flags = flags

    def _send(self, response, flags):
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException("Inference Response object must be provided when the response flags is set to zero.")
        with self._lock:
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if not self._decoupled:
                if response is not None and self._responded:
                    raise TritonModelException("Unable to send response. Non-decoupled model cannot send more than one response.")
                if response is None and not self._responded:
                    raise TritonModelException("Unable to send response. Non-decoupled model cannot send complete final before sending a response.")
            header = {"rid": self._rid, "flags": flags}
            blobs = _Blobs()
            if response is not None:
                header["response"] = _response_wire(response, self._requested, blobs)
                self._responded = True
            if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True
        reply, _ = _worker.call("send", header, blobs)
        if reply.get("error"):
            raise TritonModelException(reply["error"])

    # BLS.
    def exec(self, decoupled=False):
        return _bls(self, decoupled)

    async def async_exec(self, decoupled=False):
        import asyncio
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, _bls, self, decoupled)


def _response_wire(response, requested, blobs):
    """The header form of a response, its tensor bytes appended to blobs."""
    if response.has_error():
        err = response.error()
        return {"error": {"code": int(err.code()), "message": err.message()}}
    outputs = []
    for t in response.output_tensors():
        if requested is not None and t.name() not in requested:
            continue  # only what the request asked for (match)
        outputs.append(_describe(t, blobs))
    return {"outputs": outputs, "parameters": response.parameters()}


def _bls(request, decoupled):
    if _worker.phase != "execute":
        raise TritonModelException("BLS is only supported during the 'execute' function.")
    header = {
        "model_name": request._model_name, "model_version": request._model_version,
        "request_id": request._id, "correlation_id": request._correlation_id,
        "flags": request._flags, "timeout_us": request._timeout,
        "parameters": json.dumps(request._parameters),
        "requested_outputs": list(request._requested), "decoupled": bool(decoupled), "inputs": [],
        "trace_rid": getattr(request._trace, "_rid", None) or 0,
    }
    blobs = _Blobs()
    for t in request._inputs:
        header["inputs"].append(_describe(t, blobs))
    if decoupled:
        return ResponseIterator(header, blobs)
    reply, frame = _worker.call("bls", header, blobs)
    return _bls_response(reply["response"], frame)


def _bls_response(wire, frame):
    if "error" in wire:
        return InferenceResponse([], TritonError(wire["error"]["message"], wire["error"].get("code", 1)))
    tensors = [_worker.tensor(d, frame) for d in wire.get("outputs", [])]
    return InferenceResponse(tensors, parameters=json.loads(wire.get("parameters") or "{}"))


class ResponseIterator:
    """The responses of a decoupled BLS request, as they arrive."""

    def __init__(self, header, blobs):
        self._stream = _worker.stream("bls", header, blobs)
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        reply, frame = self._stream.next()
        if reply.get("final"):
            self._done = True
            wire = reply.get("response")
            if wire is None:
                raise StopIteration
            return _bls_response(wire, frame)
        return _bls_response(reply["response"], frame)

    def cancel(self):
        self._stream.cancel()


class Logger:
    class LogLevel(enum.IntEnum):
        INFO = 0
        WARNING = 1
        ERROR = 2
        VERBOSE = 3

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message, level=LogLevel.INFO):
        _log(str(message), Logger.LogLevel(int(level)))

    @staticmethod
    def log_info(message):
        _log(str(message), Logger.INFO)

    @staticmethod
    def log_warn(message):
        _log(str(message), Logger.WARNING)

    @staticmethod
    def log_error(message):
        _log(str(message), Logger.ERROR)

    @staticmethod
    def log_verbose(message):
        _log(str(message), Logger.VERBOSE)


def _log(message, level):
    """Logs message as the model code that called a Logger method: its
    frame is two up from here (sys._getframe, not inspect.stack, which
    reads every frame's source)."""
    if level == Logger.VERBOSE and _worker.log_verbose < 1:
        return
    caller = sys._getframe(2)
    filename, line = caller.f_code.co_filename, caller.f_lineno
    name = ["INFO", "WARNING", "ERROR", "VERBOSE"][int(level)]
    if _worker.notify is None:
        sys.stderr.write("%s %s:%d] %s\n" % (name[0], os.path.basename(filename), line, message))
        return
    _worker.notify("log", {"level": name, "file": os.path.basename(filename), "line": line, "message": message})


def get_input_tensor_by_name(inference_request, name):
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    for c in model_config.get("input", []):
        if c.get("name") == name:
            return c
    return None


def get_output_config_by_name(model_config, name):
    for c in model_config.get("output", []):
        if c.get("name") == name:
            return c
    return None


def using_decoupled_model_transaction_policy(model_config):
    if "model_transaction_policy" in model_config:
        return model_config["model_transaction_policy"].get("decoupled", False)
    return False


def get_model_dir():
    return _worker.model_dir


def _model_control(action, **args):
    if _worker.phase != "execute":
        raise TritonModelException("Model loading and unloading are only supported during the 'execute' function.")
    reply, _ = _worker.call("model_control", dict(action=action, **args), _Blobs())
    if reply.get("error"):
        raise TritonModelException(reply["error"])
    return reply.get("value")


def load_model(model_name, config="", files=None):
    encoded = {}
    for k, v in (files or {}).items():
        import base64
        encoded[k] = base64.b64encode(v).decode("ascii")
    _model_control("load", model_name=model_name, config=config, files=encoded)


def unload_model(model_name, unload_dependents=False):
    _model_control("unload", model_name=model_name, unload_dependents=bool(unload_dependents))


def is_model_ready(model_name, model_version=""):
    return bool(_model_control("is_ready", model_name=model_name, model_version=str(model_version)))


class ModelConfig:
    """The configuration auto_complete_config receives and returns."""

    def __init__(self, model_config):
        self._model_config = model_config

    def as_dict(self):
        return self._model_config

    def set_max_batch_size(self, max_batch_size):
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                "configuration specified max_batch_size " + str(current)
                + " which is greater than the value " + str(max_batch_size)
                + " set by auto_complete_config for model " + self._model_config.get("name", ""))
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        cfg = self._model_config
        if "sequence_batching" in cfg:
            raise ValueError("Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config function for model '"
                             + cfg.get("name", "") + "' tries to set scheduling_choice as 'dynamic_batching'")
        if "ensemble_scheduling" in cfg:
            raise ValueError("Configuration specified scheduling_choice as 'ensemble_scheduling', but auto-complete-config function for model '"
                             + cfg.get("name", "") + "' tries to set scheduling_choice as 'dynamic_batching'")
        if "dynamic_batching" not in cfg:
            cfg["dynamic_batching"] = {}

    def _add_tensor(self, kind, tensor):
        name = self._model_config.get("name", "")
        if not isinstance(tensor, dict):
            raise ValueError("model config " + kind + " must be a dict, found " + str(type(tensor)) + " for model " + name)
        allowed = {"name", "data_type", "dims"} | ({"optional"} if kind == "input" else set())
        for key in tensor:
            if key not in allowed:
                raise ValueError("The " + kind + " for model " + name + " contains an unexpected key '" + key + "'")
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(kind + " '" + str(tensor.get("name", "")) + "' in auto-complete-config function for model '"
                                 + name + "' is missing '" + key + "' property.")
        tensors = self._model_config.setdefault(kind, [])
        for existing in tensors:
            if existing.get("name") != tensor["name"]:
                continue
            if existing.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", tensor["data_type"]):
                raise ValueError("Unable to update " + kind + " '" + tensor["name"] + "' data_type in model '" + name + "'")
            if existing.get("dims") and list(existing["dims"]) != list(tensor["dims"]):
                raise ValueError("Unable to update " + kind + " '" + tensor["name"] + "' dims in model '" + name + "'")
            if kind == "input" and "optional" in tensor and existing.get("optional", False) != tensor["optional"]:
                raise ValueError("Unable to update input '" + tensor["name"] + "' optional in model '" + name + "'")
            existing.update(tensor)
            return
        tensors.append(dict(tensor))

    def add_input(self, input):
        self._add_tensor("input", input)

    def add_output(self, output):
        self._add_tensor("output", output)

    def set_model_transaction_policy(self, transaction_policy_dict):
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError("model transaction property in auto-complete-config function for model '"
                                 + self._model_config.get("name", "") + "' contains property other than 'decoupled'")
        policy = self._model_config.setdefault("model_transaction_policy", {})
        decoupled = bool(transaction_policy_dict.get("decoupled", False))
        if "decoupled" in policy and policy["decoupled"] != decoupled:
            raise ValueError("trying to change decoupled property in auto-complete-config for model '"
                             + self._model_config.get("name", "") + "', which is already set to " + str(policy["decoupled"]))
        policy["decoupled"] = decoupled


class MetricFamily:
    """A custom metric family, exported on the server's metrics endpoint."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2

    def __init__(self, name, description, kind):
        if kind not in (MetricFamily.COUNTER, MetricFamily.GAUGE, MetricFamily.HISTOGRAM):
            raise TritonModelException("Unknown metric family kind: " + str(kind))
        self._name, self._kind = name, kind
        reply, _ = _worker.call("metric", {"action": "family", "name": name, "description": description, "kind": kind}, _Blobs())
        if reply.get("error"):
            raise TritonModelException(reply["error"])

    def Metric(self, labels=None, buckets=None):
        return Metric(self, labels, buckets)


class Metric:
    def __init__(self, family, labels=None, buckets=None):
        labels = dict(labels or {})
        for k, v in labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TritonModelException("Metric labels must map str to str")
        if family._kind == MetricFamily.HISTOGRAM and not buckets:
            raise TritonModelException("A histogram metric needs buckets")
        reply, _ = _worker.call("metric", {"action": "metric", "name": family._name, "labels": labels,
                                           "buckets": [float(b) for b in (buckets or [])]}, _Blobs())
        if reply.get("error"):
            raise TritonModelException(reply["error"])
        self._id = reply["value"]
        self._kind = family._kind

    def increment(self, value):
        if self._kind == MetricFamily.HISTOGRAM:
            raise TritonModelException("increment is not supported on a histogram metric")
        if self._kind == MetricFamily.COUNTER and value < 0:
            raise TritonModelException("A counter cannot be incremented by a negative value")
        _worker.notify("metric", {"action": "increment", "id": self._id, "value": float(value)})

    def set(self, value):
        if self._kind != MetricFamily.GAUGE:
            raise TritonModelException("set is only supported on a gauge metric")
        _worker.notify("metric", {"action": "set", "id": self._id, "value": float(value)})

    def observe(self, value):
        if self._kind != MetricFamily.HISTOGRAM:
            raise TritonModelException("observe is only supported on a histogram metric")
        _worker.notify("metric", {"action": "observe", "id": self._id, "value": float(value)})

    def value(self):
        reply, _ = _worker.call("metric", {"action": "value", "id": self._id}, _Blobs())
        if reply.get("error"):
            raise TritonModelException(reply["error"])
        return float(reply["value"])
