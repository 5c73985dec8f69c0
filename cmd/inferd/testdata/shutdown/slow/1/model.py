import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        # Tell the test the request has arrived, then take long enough to
        # be in flight when the server is told to stop, short enough to
        # finish before its exit deadline.
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "started"), "w").close()
        time.sleep(1.5)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
