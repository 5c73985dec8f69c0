import json

import numpy as np
import triton_python_backend_utils as pb_utils

IDENTITY = b"""import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
"""

CONFIG = json.dumps({
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
})


class TritonPythonModel:
    """execute loads the model named by TARGET from a model.py it sends
    along (pb_utils.load_model's files); OUT says "loaded" or the error."""

    def execute(self, requests):
        out = []
        for request in requests:
            target = pb_utils.get_input_tensor_by_name(request, "TARGET").as_numpy()[0]
            if isinstance(target, bytes):
                target = target.decode()
            try:
                pb_utils.load_model(target, config=CONFIG, files={"file:1/model.py": IDENTITY})
                text = "loaded"
            except pb_utils.TritonModelException as e:
                text = "error: " + str(e)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text], dtype=np.object_))]))
        return out
