# Outputs that are views of the request's input, not copies: the input
# itself, and all of it but its first 16 values.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = r.inputs()[0].as_numpy()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("SAME", x), pb_utils.Tensor("TAIL", x[:, 16:])],
                parameters={"batch": len(requests)}))
        return out
