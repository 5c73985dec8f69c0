# Checks of triton_python_backend_utils that need no server
# (TritonError codes, Tensor construction, datatype helpers, byte-tensor
# serialization, InferenceResponse checks; Triton's behaviour in
# triton-inference-server/python_backend src/pb_stub.cc and
# src/resources/triton_python_backend_utils.py), run by TestShimModule.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def raises(exc, text, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        assert text in str(e), "%r lacks %r" % (str(e), text)
        return
    raise AssertionError("%s did not raise %s" % (fn, exc.__name__))


# error codes.
assert pb_utils.TritonError.INTERNAL == 1 and pb_utils.TritonError.CANCELLED == 7
assert pb_utils.TritonError("m").code() == pb_utils.TritonError.INTERNAL
assert int(pb_utils.TritonError("m", pb_utils.TritonError.NOT_FOUND).code()) == 2
raises(TypeError, "", pb_utils.TritonError, None)

# Tensor construction.
raises(pb_utils.TritonModelException, "NumPy dtype is not supported.", pb_utils.Tensor, "OUT", np.array(["a", "b"]))
raises(pb_utils.TritonModelException, "Tensor name cannot be an empty string.", pb_utils.Tensor, "", np.zeros(1))
t = pb_utils.Tensor("OUT", np.array(["a", b"b", 3], dtype=object))
assert t.triton_dtype() == 13
dtype, data = t._wire()
assert dtype == "BYTES" and bytes(data) == b"\x01\x00\x00\x00a\x01\x00\x00\x00b\x01\x00\x00\x003"
assert pb_utils.Tensor("T", np.zeros((2, 3), dtype=np.float32).T).shape() == [3, 2]

# BF16 has no numpy form.
raises(pb_utils.TritonModelException, "to_dlpack() and from_dlpack()", pb_utils.Tensor("B", b"\x00\x00", 14, [1]).as_numpy)

# datatype helpers.
assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool
raises(KeyError, "", pb_utils.triton_string_to_numpy, "TYPE_BF16")
assert pb_utils.numpy_to_triton_type(np.float16) == 10 and pb_utils.triton_to_numpy_type(8) is np.int32

# BYTES encoding.
assert pb_utils.serialize_byte_tensor(np.array([b"ab"], dtype=object)) == b"\x02\x00\x00\x00ab"
assert pb_utils.serialize_byte_tensor(np.array([], dtype=object)) == ()
assert list(pb_utils.deserialize_bytes_tensor(b"\x02\x00\x00\x00ab")) == [b"ab"]

# lookups.
cfg = {"input": [{"name": "X"}], "output": [{"name": "Y"}]}
assert pb_utils.get_input_config_by_name(cfg, "X") == {"name": "X"} and pb_utils.get_output_config_by_name(cfg, "Z") is None
assert not pb_utils.using_decoupled_model_transaction_policy(cfg)

# InferenceResponse.
raises(TypeError, "", pb_utils.InferenceResponse, output_tensors=None)
raises(pb_utils.TritonModelException, "", pb_utils.InferenceResponse, [None])
assert pb_utils.InferenceResponse([]).parameters() == "{}"
raises(pb_utils.TritonModelException, "<class 'float'>", pb_utils.InferenceResponse, [t], parameters={"k": 1.5})
assert json.loads(pb_utils.InferenceResponse([t], parameters={"k": "v"}).parameters()) == {"k": "v"}

# ModelConfig helpers (python_backend README.md, "auto_complete_config").
mc = pb_utils.ModelConfig({"name": "m", "max_batch_size": 8, "input": [], "output": []})
raises(ValueError, "", mc.set_max_batch_size, 4)
mc.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
raises(ValueError, "", mc.add_input, {"name": "X", "data_type": "TYPE_INT32", "dims": [2]})
raises(ValueError, "", mc.add_output, {"name": "Y", "dims": [1]})
mc.set_model_transaction_policy({"decoupled": True})
raises(ValueError, "", mc.set_model_transaction_policy, {"decoupled": False})
# Sequences: the flags as Triton names them; a BLS request's correlation id
# is an int (a bool is one, as Triton's stub casts it) or a str, nothing else.
assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1 and pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
both = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START | pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
r = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], correlation_id=2**64 - 1, flags=both)
assert r.correlation_id() == 2**64 - 1 and r.flags() == 3
assert pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], correlation_id="seq-a").correlation_id() == "seq-a"
c = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], correlation_id=True).correlation_id()
assert c == 1 and type(c) is int
assert pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[]).correlation_id() == 0
for bad in (np.uint64(4), 4.0, b"seq", [1]):
    raises(pb_utils.TritonModelException, "Correlation ID must be integer or string", pb_utils.InferenceRequest,
           model_name="m", inputs=[], requested_output_names=[], correlation_id=bad)
raises(TypeError, "", pb_utils.InferenceRequest, model_name="m", inputs=[], requested_output_names=[], correlation_id=None)
# DLPack through numpy.
src = pb_utils.Tensor("X", np.arange(6, dtype=np.float32).reshape(2, 3))
back = pb_utils.Tensor.from_dlpack("Y", src)
assert back.name() == "Y" and back.shape() == [2, 3] and back.triton_dtype() == 11
assert (back.as_numpy() == src.as_numpy()).all()
assert (np.from_dlpack(src) == src.as_numpy()).all() and src.__dlpack_device__()[0] == 1
raises(pb_utils.TritonModelException, "DLPack does not have support for string tensors.", pb_utils.Tensor("S", np.array([b"a"], dtype=object)).to_dlpack)
# Received tensor descriptors: a good one builds its tensor in place; each
# malformed one raises TritonModelException (its request fails, not the
# worker).
frame = memoryview(bytearray(b"\x00\x00\x80\x3f\x00\x00\x00\x40" + b"\x01\x00\x00\x00a\x02\x00\x00\x00bc"))
fp = {"name": "X", "datatype": "FP32", "shape": [1, 2], "off": 0, "len": 8}
t = pb_utils._wire_tensor(fp, frame, None)
assert t.shape() == [1, 2] and t.as_numpy().tolist() == [[1.0, 2.0]] and t.triton_dtype() == 11
t = pb_utils._wire_tensor({"name": "S", "datatype": "BYTES", "shape": [2], "off": 8, "len": 11}, frame, None)
assert t.as_numpy().tolist() == [b"a", b"bc"]
assert pb_utils._wire_tensor({"name": "E", "datatype": "FP32", "shape": [0, 5], "off": 0, "len": 0}, frame, None).shape() == [0, 5]
assert pb_utils._wire_tensor({"name": "B", "datatype": "BF16", "shape": [2], "off": 0, "len": 4}, frame, None)._raw == b"\x00\x00\x80\x3f"
assert pb_utils._wire_tensor(dict(fp, arena=True), None, frame).shape() == [1, 2]
for bad, text in [
    (dict(fp, shape=[4611686018427387904], len=0), "holds 0 bytes"),
    (dict(fp, shape=[1, 3]), "holds 8 bytes"),
    (dict(fp, shape=[1]), "holds 8 bytes"),
    (dict(fp, shape=[-1, -2]), "invalid shape"),
    (dict(fp, shape=[2, True]), "invalid shape"),
    (dict(fp, shape=[1.0, 2]), "invalid shape"),
    (dict(fp, shape="12"), "invalid shape"),
    (dict(fp, shape=[2**63 - 1, 2**63 - 1, 0], len=0), "of shape"),
    (dict(fp, shape=[2**64, 0], len=0), "of shape"),
    (dict(fp, shape=[1] * 70, len=4), "of shape"),
    (dict(fp, datatype="FP128"), "unknown datatype 'FP128'"),
    (dict(fp, datatype=None), "unknown datatype"),
    (dict(fp, off=-1), "lies outside the frame"),
    (dict(fp, off=15), "lies outside the frame"),
    (dict(fp, len=2**70), "lies outside the frame"),
    (dict(fp, off="0"), "lies outside the frame"),
    (dict(fp, arena=True), "lies outside the frame"),
    (dict(fp, name=""), "without a name"),
    ([], "malformed tensor description"),
    ({"name": "S", "datatype": "BYTES", "shape": [3], "off": 8, "len": 11}, "holds 2 BYTES elements"),
    ({"name": "S", "datatype": "BYTES", "shape": [2], "off": 8, "len": 10}, "runs past the end"),
    ({"name": "S", "datatype": "BYTES", "shape": [2], "off": 8, "len": 7}, "truncated BYTES element length"),
    ({"name": "B", "datatype": "BF16", "shape": [3], "off": 0, "len": 4}, "holds 4 bytes"),
]:
    try:
        raises(pb_utils.TritonModelException, text, pb_utils._wire_tensor, bad, frame, None)
    except AssertionError:
        raise AssertionError("%r did not raise %r" % (bad, text))

# Placing an execute's outputs: a large one that is a view of the
# execution's inputs (its part of the arena's input half) is described
# where it lies; a copy, a small one, or one reaching past the part goes
# to the output half as before.
inputs = np.zeros(1 << 20, dtype=np.uint8)
start = inputs.ctypes.data
part = 1 << 19  # this execution's part: the first half of inputs
out_half = bytearray(1 << 20)
for name, data, want in [
    ("view", inputs[4096:4096 + 65536], (4096, 65536, "in")),
    ("whole part", inputs[:part], (0, part, "in")),
    ("float view", inputs[64:64 + 65536].view(np.float32), (64, 65536, "in")),
    ("copy", inputs[4096:4096 + 65536].copy(), (0, 65536, True)),
    ("small view", inputs[:1024], (0, 1024, False)),
    ("past the part", inputs[part - 64:part + 65536], (0, 65536 + 64, True)),
]:
    blobs = pb_utils._Blobs(memoryview(out_half), 0, (start, part))
    got = blobs.add(memoryview(np.ascontiguousarray(data)).cast("B"))
    assert got == want, (name, got, want)
    if want[2] is True:
        assert bytes(out_half[:want[1]]) == data.tobytes(), name
# Without the inputs' place (a decoupled send, BLS) nothing is "in".
assert pb_utils._Blobs(memoryview(out_half)).add(inputs[:65536])[2] is True
d = pb_utils._describe(pb_utils.Tensor("O", inputs[:65536]), pb_utils._Blobs(None, 0, (start, part)))
assert d == {"name": "O", "datatype": "UINT8", "shape": [65536], "off": 0, "len": 65536, "arena_in": True}, d
print("ok")
