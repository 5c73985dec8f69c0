import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        linger = 0
        for request in requests:
            threading.Thread(target=self.stream, args=(request,), daemon=True).start()
            t = pb_utils.get_input_tensor_by_name(request, "LINGER")
            if t is not None:
                linger = max(linger, int(t.as_numpy()[0]) / 1e6)
        # LINGER: execute returns that long after the streams began, so a
        # stream's first send reaches its consumer before the execution ends.
        if linger:
            time.sleep(linger)
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
        delay = pb_utils.get_input_tensor_by_name(request, "DELAY")
        wait = int(delay.as_numpy()[0]) / 1e6 if delay is not None else 0
        for i, v in enumerate(values):
            if wait:
                time.sleep(wait)
            if sender.is_cancelled():
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            sender.send(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([v], dtype=np.int32)),
                pb_utils.Tensor("IDX", np.array([i], dtype=np.uint32)),
            ]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
