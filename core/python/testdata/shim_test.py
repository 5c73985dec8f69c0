# Checks of triton_python_backend_utils that need no server
# (python-backend.md §12 lines 23, 31, 32, 34–39), run by TestShimModule.
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


# 23: error codes.
assert pb_utils.TritonError.INTERNAL == 1 and pb_utils.TritonError.CANCELLED == 7
assert pb_utils.TritonError("m").code() == pb_utils.TritonError.INTERNAL
assert int(pb_utils.TritonError("m", pb_utils.TritonError.NOT_FOUND).code()) == 2
raises(TypeError, "", pb_utils.TritonError, None)

# 31, 32: Tensor construction.
raises(pb_utils.TritonModelException, "NumPy dtype is not supported.", pb_utils.Tensor, "OUT", np.array(["a", "b"]))
raises(pb_utils.TritonModelException, "Tensor name cannot be an empty string.", pb_utils.Tensor, "", np.zeros(1))
t = pb_utils.Tensor("OUT", np.array(["a", b"b", 3], dtype=object))
assert t.triton_dtype() == 13
dtype, data = t._wire()
assert dtype == "BYTES" and bytes(data) == b"\x01\x00\x00\x00a\x01\x00\x00\x00b\x01\x00\x00\x003"
assert pb_utils.Tensor("T", np.zeros((2, 3), dtype=np.float32).T).shape() == [3, 2]

# 34: BF16 has no numpy form.
raises(pb_utils.TritonModelException, "to_dlpack() and from_dlpack()", pb_utils.Tensor("B", b"\x00\x00", 14, [1]).as_numpy)

# 35: datatype helpers.
assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool
raises(KeyError, "", pb_utils.triton_string_to_numpy, "TYPE_BF16")
assert pb_utils.numpy_to_triton_type(np.float16) == 10 and pb_utils.triton_to_numpy_type(8) is np.int32

# 36: BYTES encoding.
assert pb_utils.serialize_byte_tensor(np.array([b"ab"], dtype=object)) == b"\x02\x00\x00\x00ab"
assert pb_utils.serialize_byte_tensor(np.array([], dtype=object)) == ()
assert list(pb_utils.deserialize_bytes_tensor(b"\x02\x00\x00\x00ab")) == [b"ab"]

# 37: lookups.
cfg = {"input": [{"name": "X"}], "output": [{"name": "Y"}]}
assert pb_utils.get_input_config_by_name(cfg, "X") == {"name": "X"} and pb_utils.get_output_config_by_name(cfg, "Z") is None
assert not pb_utils.using_decoupled_model_transaction_policy(cfg)

# 38, 39: InferenceResponse.
raises(TypeError, "", pb_utils.InferenceResponse, output_tensors=None)
raises(pb_utils.TritonModelException, "", pb_utils.InferenceResponse, [None])
assert pb_utils.InferenceResponse([]).parameters() == "{}"
raises(pb_utils.TritonModelException, "<class 'float'>", pb_utils.InferenceResponse, [t], parameters={"k": 1.5})
assert json.loads(pb_utils.InferenceResponse([t], parameters={"k": "v"}).parameters()) == {"k": "v"}

# §3.4: ModelConfig helpers.
mc = pb_utils.ModelConfig({"name": "m", "max_batch_size": 8, "input": [], "output": []})
raises(ValueError, "", mc.set_max_batch_size, 4)
mc.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
raises(ValueError, "", mc.add_input, {"name": "X", "data_type": "TYPE_INT32", "dims": [2]})
raises(ValueError, "", mc.add_output, {"name": "Y", "dims": [1]})
mc.set_model_transaction_policy({"decoupled": True})
raises(ValueError, "", mc.set_model_transaction_policy, {"decoupled": False})
# DLPack through numpy.
src = pb_utils.Tensor("X", np.arange(6, dtype=np.float32).reshape(2, 3))
back = pb_utils.Tensor.from_dlpack("Y", src)
assert back.name() == "Y" and back.shape() == [2, 3] and back.triton_dtype() == 11
assert (back.as_numpy() == src.as_numpy()).all()
assert (np.from_dlpack(src) == src.as_numpy()).all() and src.__dlpack_device__()[0] == 1
raises(pb_utils.TritonModelException, "DLPack does not have support for string tensors.", pb_utils.Tensor("S", np.array([b"a"], dtype=object)).to_dlpack)
print("ok")
