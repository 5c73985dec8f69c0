import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """A decoupled sequence model: each sequence adds up its INPUTs in the
    model's memory, keyed by request.correlation_id(); START begins a sum,
    END forgets it. Each request is answered twice with the running sum,
    then with the final flag alone."""

    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sid, flags = request.correlation_id(), request.flags()
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[sid] = 0
            elif sid not in self.sums:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("no START for sequence %s" % sid)),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            self.sums[sid] += int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0][0])
            out = pb_utils.Tensor("OUTPUT", np.array([[self.sums[sid]]], dtype=np.int32))
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
                del self.sums[sid]
            for _ in range(2):
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
