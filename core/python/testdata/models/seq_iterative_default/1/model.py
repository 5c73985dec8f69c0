import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """seq_iterative in the default (not decoupled) mode: a rescheduled
    request's place in the returned list is None, and only the last
    execution answers it, OUT 0 and CORR its correlation id. With no
    response, no state goes back to the server (as in Triton), so the
    count is kept here, by correlation id. With N negative it answers a
    request it reschedules, which Triton refuses."""

    def initialize(self, args):
        self.left = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            if not pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()[0, 0]:
                responses.append(None)
                continue
            n = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
            corr = request.correlation_id()
            if pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0, 0]:
                self.left[corr] = abs(int(n[0, 0]))
            self.left[corr] -= 1
            left = np.array([[self.left[corr]]], dtype=np.int32)
            response = pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", left),
                pb_utils.Tensor("CORR", np.array([[corr]], dtype=np.uint64)),
                pb_utils.Tensor("LEFT_OUT", left),
            ])
            if left[0, 0] > 0:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(response if n[0, 0] < 0 else None)
            else:
                del self.left[corr]
                responses.append(response)
        return responses
