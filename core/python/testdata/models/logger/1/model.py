import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        logger = pb_utils.Logger
        logger.log_info("Info Msg!")
        logger.log_warn("Warning Msg!")
        logger.log_error("Error Msg!")
        logger.log_verbose("Verbose Msg!")
        print("printed from execute")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
