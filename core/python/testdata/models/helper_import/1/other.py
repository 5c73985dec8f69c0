import numpy as np
import triton_python_backend_utils as pb_utils

import helper
from . import helper as relative


class TritonPythonModel:
    def execute(self, requests):
        text = "%s %s %s" % (__name__, helper.VALUE, relative.VALUE)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text], dtype=np.object_))]) for _ in requests]
