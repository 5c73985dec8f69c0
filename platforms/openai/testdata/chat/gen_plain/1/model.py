# Answers each prompt with the prompt in angle brackets, in one response.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            prompts = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)
            out = np.array([[b"<" + p + b">"] for p in prompts], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
        return responses
