import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Sends N responses of SIZE integers each, as fast as it can, from a
    thread per request; it stops at the first send the server refuses or
    once the request is cancelled, then sends the final flag."""

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.stream, args=(request,), daemon=True).start()
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
        size = int(pb_utils.get_input_tensor_by_name(request, "SIZE").as_numpy()[0])
        out = np.arange(size, dtype=np.int32)
        for _ in range(n):
            if sender.is_cancelled():
                break
            try:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
            except Exception:
                break
        try:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:
            pass
