import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """A stateful accumulator as Triton users write one: the running sum of
    each sequence is kept in the model's memory, keyed by the request's
    correlation id, reset at START and dropped at END. OUTPUT is the sum so
    far, OPEN the number of sequences this instance holds after the
    request, PID its worker's process id."""

    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            cid = request.correlation_id()
            flags = request.flags()
            x = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().sum())
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[cid] = 0
            if cid not in self.sums:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("sequence %r has no START" % (cid,))))
                continue
            self.sums[cid] += x
            total = self.sums[cid]
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
                del self.sums[cid]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", np.array([[total]], dtype=np.int32)),
                pb_utils.Tensor("OPEN", np.array([[len(self.sums)]], dtype=np.int32)),
                pb_utils.Tensor("PID", np.array([[os.getpid()]], dtype=np.int32)),
            ]))
        return responses
