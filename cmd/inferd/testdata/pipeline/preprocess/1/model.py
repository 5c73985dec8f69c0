# A tokenizer step like the user guide's: the code points of the first
# 128 characters, padded with zeros.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "raw_text").as_numpy()[0].decode("utf-8")
            ids = [ord(c) for c in text[:128]]
            ids += [0] * (128 - len(ids))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("input_ids", np.array([ids], dtype=np.int64))]))
        return responses
