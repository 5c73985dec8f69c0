import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Echoes INPUT0, taking 40 ms per execution however many requests it
    holds: batching requests together multiplies throughput, so a config
    search can tell dynamic batching from none without depending on CPU
    speed (the sleep takes no CPU)."""

    def execute(self, requests):
        time.sleep(0.04)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())])
            for r in requests
        ]
