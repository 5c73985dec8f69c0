import time

import triton_python_backend_utils as pb_utils


class _Broken(pb_utils.InferenceResponse):
    # Parameters that are not the JSON string the server expects make the
    # execute's answer undecodable.
    def parameters(self):
        return {"not": "a string"}


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = r.inputs()[0].as_numpy()
            if x[0] == 13:
                time.sleep(0.2)  # the next request waits in the socket meanwhile
                out.append(_Broken([pb_utils.Tensor("OUT", x)]))
            else:
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
