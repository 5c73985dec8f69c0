import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.marker = json.loads(args["model_config"])["parameters"].get("marker", {}).get("string_value")

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", a + b)
            out1 = pb_utils.Tensor("OUTPUT1", a - b)
            # How many requests shared this call, for the batching test.
            responses.append(pb_utils.InferenceResponse([out0, out1], parameters={"batch": len(requests)}))
        return responses

    def finalize(self):
        if self.marker:
            with open(os.path.join(self.marker, "finalized-%d" % os.getpid()), "w") as f:
                f.write("finalized")
