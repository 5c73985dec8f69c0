import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """While the file "hold" exists beside the model, is_ready() writes
    "busy" and waits for "hold" to go, then writes "finished"."""

    def initialize(self, args):
        self.dir = args["model_repository"]

    def _path(self, name):
        return os.path.join(self.dir, name)

    def is_ready(self):
        if os.path.exists(self._path("hold")):
            open(self._path("busy"), "w").close()
            while os.path.exists(self._path("hold")):
                time.sleep(0.01)
            open(self._path("finished"), "w").close()
        return True

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
