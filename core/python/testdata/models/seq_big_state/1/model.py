import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Implicit state too large for the socket: at START the state is SIZE
    elements of INPUT, after that INPUT is added to every element.
    OUTPUT is [the state's first element, its length], the state's own
    first and last elements having been checked equal. The direct
    strategy pads a batch with not-ready requests (READY 0) for the slots
    with nothing to run: they get a response that goes nowhere."""

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0, 0]
            size = int(pb_utils.get_input_tensor_by_name(request, "SIZE").as_numpy()[0, 0])
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0, 0]
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy()
            if not pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()[0, 0]:
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUTPUT", np.zeros((1, 2), dtype=np.float32)),
                    pb_utils.Tensor("OUTPUT_STATE", state),
                ]))
                continue
            if start:
                state = np.full((1, size), x, dtype=np.float32)
            else:
                if state.shape != (1, size) or not np.all(state == state[0, 0]):
                    raise pb_utils.TritonModelException("INPUT_STATE is not the state this sequence left: %s" % (state.shape,))
                state = state + x
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", np.array([[state[0, 0], state.shape[1]]], dtype=np.float32)),
                pb_utils.Tensor("OUTPUT_STATE", state),
            ]))
        return responses
