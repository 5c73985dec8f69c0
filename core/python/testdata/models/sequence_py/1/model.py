import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The sequence model of triton-inference-server/server
    qa/python_models/sequence_py: each sequence counts 1, 2, 3, ... in the
    model's memory, keyed by request.correlation_id(); START begins a count
    (an id already counting is an error), other requests need one begun,
    END forgets it (the qa model keeps it until finalize). Decoupled, it sends each count three times, then the final flag."""

    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.sequences = {}
        self.decoupled = self.model_config.get("model_transaction_policy", {}).get("decoupled")

    def next_output(self, request):
        sid = request.correlation_id()
        flags = request.flags()
        if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
            if sid in self.sequences:
                raise pb_utils.TritonModelException("Can't start a new sequence with existing ID")
            self.sequences[sid] = [1]
        else:
            if sid not in self.sequences:
                raise pb_utils.TritonModelException("Need START flag for a sequence ID that doesn't already exist.")
            self.sequences[sid].append(self.sequences[sid][-1] + 1)
        output = self.sequences[sid][-1]
        if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
            del self.sequences[sid]
        return pb_utils.Tensor("OUTPUT0", np.array([[output]], dtype=np.int32))

    def execute(self, requests):
        if not self.decoupled:
            return [pb_utils.InferenceResponse([self.next_output(r)]) for r in requests]
        for request in requests:
            sender = request.get_response_sender()
            out = self.next_output(request)
            for _ in range(3):
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
