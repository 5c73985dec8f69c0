import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [2]})
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]})
        config.set_max_batch_size(4)
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * 10)]) for r in requests]
