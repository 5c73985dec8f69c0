import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Calls the stateful seq_accumulate through BLS (triton-inference-server/
    python_backend README.md, "Using BLS with Stateful Models"): the
    correlation id is CORR (decimal: an int, else the text as a string id),
    the flags FLAGS; it answers with seq_accumulate's OUTPUT or error."""

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "CORR").as_numpy()[0].decode()
            corr = int(text) if text.isdigit() else text
            flags = int(pb_utils.get_input_tensor_by_name(request, "FLAGS").as_numpy()[0])
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().reshape(1, 1)
            response = pb_utils.InferenceRequest(
                model_name="seq_accumulate", correlation_id=corr, flags=flags,
                inputs=[pb_utils.Tensor("INPUT", x)], requested_output_names=["OUTPUT"]).exec()
            if response.has_error():
                responses.append(pb_utils.InferenceResponse(error=response.error()))
                continue
            out = pb_utils.get_output_tensor_by_name(response, "OUTPUT").as_numpy().reshape(1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
