import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]

    def finalize(self):
        # A finalize that never returns: only the server's exit deadline
        # ends this worker.
        time.sleep(1000)
