import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = int(requests[0].inputs()[0].as_numpy()[0])
        sender = requests[0].get_response_sender()
        if mode == 0:
            return []
        if mode == 1:
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
            raise ValueError("boom")
        # Sender rules: report which raised.
        texts = []
        for call in (lambda: sender.send(), lambda: sender.send(pb_utils.InferenceResponse([]), flags=2)):
            try:
                call()
            except pb_utils.TritonModelException as e:
                texts.append(str(e))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        try:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except pb_utils.TritonModelException as e:
            texts.append(str(e))
        pb_utils.Logger.log_info(" | ".join(texts))
        return None
