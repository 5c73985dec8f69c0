import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "CODE").as_numpy()[0].decode()
            code = getattr(pb_utils.TritonError, name)
            out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("error code: " + name, code)))
        return out
