import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """seq_state, decoupled: the history (OUTPUT) and the next state
    (OUTPUT_STATE) go in one response through the request's sender, then
    the final flag alone."""

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy()
            history = (x if start[0, 0] else np.concatenate([state, x], axis=1)).astype(np.int32)
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", history),
                pb_utils.Tensor("OUTPUT_STATE", history),
            ]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
