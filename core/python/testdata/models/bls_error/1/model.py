import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Calls error_code through BLS with its CODE and answers with the
    error the call returned, unchanged: its message and code."""

    def execute(self, requests):
        out = []
        for request in requests:
            code = pb_utils.get_input_tensor_by_name(request, "CODE")
            response = pb_utils.InferenceRequest(model_name="error_code", inputs=[code], requested_output_names=["OUT"]).exec()
            out.append(pb_utils.InferenceResponse(error=response.error()))
        return out
