import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Calls corr_echo with the correlation id CORR names (decimal: an int,
    "True": the bool, else the text as a string id) and answers with what
    corr_echo saw, or with its error."""

    def execute(self, requests):
        out = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "CORR").as_numpy()[0].decode()
            corr = int(text) if text.lstrip("-").isdigit() else True if text == "True" else text
            dummy = pb_utils.Tensor("IN", np.zeros(1, dtype=np.int32))
            response = pb_utils.InferenceRequest(model_name="corr_echo", correlation_id=corr, inputs=[dummy],
                                                 requested_output_names=["SEEN"]).exec()
            if response.has_error():
                out.append(pb_utils.InferenceResponse(error=response.error()))
            else:
                out.append(pb_utils.InferenceResponse(response.output_tensors()))
        return out
