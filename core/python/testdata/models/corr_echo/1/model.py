import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Answers with its request's correlation id: its type and value."""

    def execute(self, requests):
        out = []
        for request in requests:
            c = request.correlation_id()
            seen = "%s:%s" % (type(c).__name__, c)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen.encode()], dtype=object))]))
        return out
