import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Sums a decoupled model's responses through BLS, then calls an
    ensemble with async_exec."""

    async def execute(self, requests):
        out = []
        for request in requests:
            n = int(request.inputs()[0].as_numpy()[0])
            values = pb_utils.Tensor("IN", np.arange(n, dtype=np.int32))
            total, count = 0, 0
            stream = pb_utils.InferenceRequest(model_name="repeat", requested_output_names=["OUT"], inputs=[values]).exec(decoupled=True)
            for response in stream:
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
                t = pb_utils.get_output_tensor_by_name(response, "OUT")
                if t is not None:
                    total += int(t.as_numpy()[0])
                    count += 1
            x = pb_utils.Tensor("INPUT0", np.ones((1, 4), dtype=np.float32))
            y = pb_utils.Tensor("INPUT1", np.ones((1, 4), dtype=np.float32))
            ens = await pb_utils.InferenceRequest(model_name="pair", requested_output_names=["SUM"], inputs=[x, y]).async_exec()
            if ens.has_error():
                raise pb_utils.TritonModelException(ens.error().message())
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", np.array([total], dtype=np.int64)),
                pb_utils.Tensor("COUNT", np.array([count], dtype=np.int64)),
                pb_utils.Tensor("ENSEMBLE", pb_utils.get_output_tensor_by_name(ens, "SUM").as_numpy()),
            ]))
        return out
