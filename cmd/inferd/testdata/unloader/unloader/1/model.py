import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """execute unloads the model named by TARGET with pb_utils.unload_model,
    which returns without waiting for the unload. OUT says "unloaded
    <name>" or the error."""

    def execute(self, requests):
        out = []
        for request in requests:
            target = pb_utils.get_input_tensor_by_name(request, "TARGET").as_numpy()[0]
            if isinstance(target, bytes):
                target = target.decode()
            try:
                pb_utils.unload_model(target)
                text = "unloaded " + target
            except pb_utils.TritonModelException as e:
                text = "error: " + str(e)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text], dtype=np.object_))]))
        return out
