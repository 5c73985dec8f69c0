import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = requests[0].inputs()[0].as_numpy()
        if x[0] < 0:
            os._exit(1)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
