# A model with is_ready() whose worker notes its pid in the file "pid"
# beside the model, so a test can stop the process (SIGSTOP) and wedge its
# socket.
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        with open(os.path.join(args["model_repository"], "pid"), "w") as f:
            f.write(str(os.getpid()))

    def is_ready(self):
        return True

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
