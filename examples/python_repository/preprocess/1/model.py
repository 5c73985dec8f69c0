# Min-max scaling: each row of RAW becomes (x - min) / (max - min), so its
# smallest value is 0 and its largest 1 (a constant row becomes zeros).
# Written as for Triton's Python backend; inferd runs it unchanged.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            low = raw.min(axis=1, keepdims=True)
            span = raw.max(axis=1, keepdims=True) - low
            scaled = np.divide(raw - low, span, out=np.zeros_like(raw), where=span != 0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCALED", scaled.astype(np.float32))]))
        return responses
