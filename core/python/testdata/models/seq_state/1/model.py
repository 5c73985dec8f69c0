import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Implicit state: the server keeps the sequence's history. INPUT_STATE
    holds the values of the sequence's earlier requests (at START it holds
    placeholder data, which is ignored); OUTPUT_STATE, the history with this
    request's INPUT appended, is the next request's INPUT_STATE. OUTPUT is
    that history too, so the client sees what the state held. The model
    keeps nothing between requests. INPUT -1 ends the worker."""

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()  # [1, 1]
            if x[0, 0] == -1:
                os._exit(1)
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()  # [1, 1]
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy()  # [1, n]
            if state.dtype != np.int32 or state.ndim != 2 or state.shape[0] != 1:
                raise pb_utils.TritonModelException("INPUT_STATE: %s %s" % (state.dtype, state.shape))
            history = x if start[0, 0] else np.concatenate([state, x], axis=1)
            history = history.astype(np.int32)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", history),
                pb_utils.Tensor("OUTPUT_STATE", history),
            ]))
        return responses
