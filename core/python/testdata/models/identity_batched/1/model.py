import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        # How many requests shared this call, for the destinations test.
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())],
                                           parameters={"batch": len(requests)})
                for r in requests]
