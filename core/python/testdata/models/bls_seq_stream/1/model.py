import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Calls the decoupled sequence model sequence_py_decoupled through BLS
    with exec(decoupled=True), the correlation id CORR (decimal: an int,
    else a string id) and the flags FLAGS; OUTPUT is every count its
    responses carried, in order."""

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "CORR").as_numpy()[0].decode()
            corr = int(text) if text.isdigit() else text
            flags = int(pb_utils.get_input_tensor_by_name(request, "FLAGS").as_numpy()[0])
            one = pb_utils.Tensor("INPUT0", np.ones((1, 1), dtype=np.int32))
            counts = []
            error = None
            for response in pb_utils.InferenceRequest(
                    model_name="sequence_py_decoupled", correlation_id=corr, flags=flags,
                    inputs=[one], requested_output_names=["OUTPUT0"]).exec(decoupled=True):
                if response.has_error():
                    error = response.error()
                    break
                out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0")
                if out is not None:
                    counts.extend(out.as_numpy().flatten().tolist())
            if error is not None:
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.array(counts, dtype=np.int32))]))
        return responses
