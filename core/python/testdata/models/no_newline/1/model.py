# Writes 200 KiB of "x" to stdout per request and never a newline; an input
# of -1 writes "last words" to stderr, with no newline, and exits.
import os
import sys

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] < 0:
                sys.stderr.write("last words")
                sys.stderr.flush()
                os._exit(1)
            sys.stdout.write("x" * (200 << 10))
            sys.stdout.flush()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
