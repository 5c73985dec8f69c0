import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """A decoupled model with an async execute. IN 0: one response, then a
    raise; 1: one response and never a final flag; 2: one response and
    the final flag; 3: a raise before any response."""

    async def execute(self, requests):
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            await asyncio.sleep(0.01)
            if mode == 3:
                raise ValueError("async execute failed before responding")
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], dtype=np.int32))]))
            if mode == 0:
                raise ValueError("async execute failed after one response")
            if mode == 2:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
