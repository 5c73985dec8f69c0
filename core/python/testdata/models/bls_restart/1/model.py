import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def stream(n, delay_us):
    values = pb_utils.Tensor("IN", np.arange(n, dtype=np.int32))
    delay = pb_utils.Tensor("DELAY", np.array([delay_us], dtype=np.uint32))
    return pb_utils.InferenceRequest(model_name="repeat", requested_output_names=["OUT"],
                                     inputs=[values, delay]).exec(decoupled=True)


class TritonPythonModel:
    """MODE 0: starts a 2 s decoupled BLS stream, reads one response and
    kills this worker. MODE 1: starts a long stream, cancels it after 3 s
    and answers with how many responses came."""

    def execute(self, requests):
        out = []
        for request in requests:
            mode = int(request.inputs()[0].as_numpy()[0])
            if mode == 0:
                it = stream(20, 100000)
                next(it)
                os._exit(1)
            it = stream(100000, 1000)
            count = 0
            deadline = time.monotonic() + 3
            for response in it:
                if response.has_error():
                    break
                count += 1
                if deadline is not None and time.monotonic() > deadline:
                    it.cancel()
                    deadline = None
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("COUNT", np.array([count], dtype=np.int64))]))
        return out
