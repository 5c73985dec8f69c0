# A decoupled model: each request gets START responses, COUNT = START,
# START - 1, ..., 1, then the final flag (Triton's Python backend
# "Decoupled mode"). A START below 1 gets the final flag alone.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0])
            for count in range(start, 0, -1):
                if sender.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
