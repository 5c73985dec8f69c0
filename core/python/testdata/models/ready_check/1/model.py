import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """is_ready() answers what the file "answer" beside the model says."""

    def initialize(self, args):
        self.answer = os.path.join(args["model_repository"], "answer")

    def is_ready(self):
        with open(self.answer) as f:
            text = f.read().strip()
        return {"true": True, "false": False}.get(text, text)

    def execute(self, requests):
        for r in requests:
            time.sleep(float(r.inputs()[0].as_numpy()[0]))  # seconds, to run long
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
