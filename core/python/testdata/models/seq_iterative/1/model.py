import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """An iterative sequence, after python_backend's README ("Request
    Rescheduling"): a request asks for N responses. Each execution sends
    one, OUT the count still to come (the implicit state LEFT, N at START)
    and CORR the request's correlation id, and reschedules the request
    until the count reaches 0, whose response is the final one. The
    not-ready rows of a padded batch are closed at once."""

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            if not pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()[0, 0]:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            left = pb_utils.get_input_tensor_by_name(request, "LEFT_IN").as_numpy()
            if pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0, 0]:
                left = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
            left = (left - 1).astype(np.int32)
            response = pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", left),
                pb_utils.Tensor("CORR", np.array([[request.correlation_id()]], dtype=np.uint64)),
                pb_utils.Tensor("LEFT_OUT", left),
            ])
            if left[0, 0] > 0:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(response)
            else:
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
