"""A model whose cost is fixed plus per row: y = x after 3 ms + 0.25 ms a row."""
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FIXED_S, PER_ROW_S = 0.003, 0.00025


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        time.sleep(FIXED_S + PER_ROW_S * sum(x.shape[0] for x in xs))
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", np.asarray(x, dtype=np.float32))]) for x in xs]
