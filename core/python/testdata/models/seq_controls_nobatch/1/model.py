import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _value(v):
    if isinstance(v, bytes):
        return v.decode()
    return v.item() if hasattr(v, "item") else v


class TritonPythonModel:
    """Answers with what its request carried, as JSON: every input tensor
    in order (name, datatype, shape, values), the correlation id and the
    flags. The sequence batcher's control inputs arrive as ordinary
    inputs after the configured ones."""

    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = []
            for t in request.inputs():
                arr = t.as_numpy()
                inputs.append({"name": t.name(), "datatype": arr.dtype.name,
                               "shape": t.shape(), "values": [_value(v) for v in arr.flatten()]})
            cid = request.correlation_id()
            seen = {"inputs": inputs, "correlation_id": cid, "correlation_type": type(cid).__name__,
                    "flags": request.flags(),
                    "start": get(request, "START"), "end": get(request, "END")}
            text = json.dumps(seen).encode()
            shape = pb_utils.get_input_tensor_by_name(request, "INPUT").shape()  # [1, 1]: a batch of one
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([text], dtype=object).reshape(shape))]))
        return responses


def get(request, name):
    """The first value of the input named name, through the lookup models use."""
    t = pb_utils.get_input_tensor_by_name(request, name)
    return None if t is None else _value(t.as_numpy().flatten()[0])
