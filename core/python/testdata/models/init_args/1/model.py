import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def __init__(self):
        self.constructed = getattr(self, "constructed", 0) + 1

    def initialize(self, args):
        self.args = args
        self.types = sorted({type(k).__name__ for k in args} | {type(v).__name__ for v in args.values()})

    def execute(self, requests):
        out = []
        for request in requests:
            info = {
                "name": __name__,
                "types": self.types,
                "constructed": self.constructed,
                "requested": sorted(request.requested_output_names()),
                "requested_type": type(request.requested_output_names()).__name__,
                "parameters": request.parameters(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "request_id": request.request_id(),
                "model_dir": pb_utils.get_model_dir(),
                "executable": sys.executable,
                "pid": os.getpid(),
            }
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("ARGS", np.array([json.dumps(self.args)], dtype=np.object_)),
                pb_utils.Tensor("INFO", np.array([json.dumps(info)], dtype=np.object_)),
            ]))
        return out
