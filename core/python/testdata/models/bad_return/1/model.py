import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = int(requests[0].inputs()[0].as_numpy()[0])
        ok = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.0], dtype=np.float64))])
        if mode == 0:
            return tuple(ok for _ in requests)
        if mode == 1:
            return [ok] * (len(requests) + 1)
        if mode == 2:
            return ["not a response"] * len(requests)
        if mode == 3:
            return None
        if mode == 4:
            sender = requests[0].get_response_sender()
            sender.send(ok, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return [None]
        if mode == 5:
            # float64 for an FP32 output, and an output nobody asked for.
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.5])), pb_utils.Tensor("EXTRA", np.array([1]))])]
        return [ok]
