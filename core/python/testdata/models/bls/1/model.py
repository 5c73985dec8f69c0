import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        try:
            pb_utils.InferenceRequest(model_name="add_sub", requested_output_names=["OUTPUT0"], inputs=[]).exec()
            self.init_bls = "allowed"
        except pb_utils.TritonModelException as e:
            self.init_bls = str(e)

    def execute(self, requests):
        out = []
        for request in requests:
            # The model name arrives as a numpy bytes element, as in Triton's BLS example.
            model = pb_utils.get_input_tensor_by_name(request, "MODEL").as_numpy()[0]
            inputs = [pb_utils.get_input_tensor_by_name(request, n) for n in ("INPUT0", "INPUT1")]
            response = pb_utils.InferenceRequest(model_name=model, requested_output_names=["OUTPUT0", "OUTPUT1"], inputs=inputs).exec()
            if response.has_error():
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(response.error().message() + " | init: " + self.init_bls)))
            else:
                out.append(pb_utils.InferenceResponse(response.output_tensors()))
        return out
