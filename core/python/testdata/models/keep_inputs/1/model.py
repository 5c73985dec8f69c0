# Decoupled: execute keeps its requests and returns; a thread reads each
# request's input 0.3 s later, while later executes run, and answers with
# the input's smallest and largest values, then the final flag.
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.answer, args=(request,)).start()
        return None

    def answer(self, request):
        time.sleep(0.3)
        x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
        out = np.array([x.min(), x.max()], dtype=np.float32)
        sender = request.get_response_sender()
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
