import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Waits up to 10 s for its request to be cancelled, then answers
    CANCELLED and leaves a file "cancelled" beside the model."""

    def initialize(self, args):
        self.marker = os.path.join(args["model_repository"], "cancelled")

    def execute(self, requests):
        request = requests[0]
        deadline = time.time() + 10
        while not request.is_cancelled() and time.time() < deadline:
            time.sleep(0.005)
        if request.is_cancelled():
            open(self.marker, "w").close()
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED))]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", request.inputs()[0].as_numpy())])]
