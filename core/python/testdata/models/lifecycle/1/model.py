# A model with a child process: initialize starts `sleep 1000` and writes
# "<child pid>" to <marker>/<worker pid>; finalize writes
# <marker>/finalized-<worker pid>, and hangs when the parameter
# hang_finalize is "yes". A negative input makes the worker exit with
# status 3 after a line on stderr; an input of 2 writes <marker>/executing
# and sleeps. initialize fails while <marker>/refuse exists, and waits
# while <marker>/hold exists.
import json
import os
import subprocess
import sys
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.marker = params.get("marker", {}).get("string_value", "")
        self.hang = params.get("hang_finalize", {}).get("string_value", "") == "yes"
        if self.marker and os.path.exists(os.path.join(self.marker, "refuse")):
            raise Exception("refusing to initialize")
        while self.marker and os.path.exists(os.path.join(self.marker, "hold")):
            time.sleep(0.02)
        self.child = subprocess.Popen(["sleep", "1000"])
        self.note(str(os.getpid()), str(self.child.pid))

    def note(self, name, text):
        if self.marker:
            with open(os.path.join(self.marker, name), "w") as f:
                f.write(text)

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] < 0:
                sys.stderr.write("lifecycle: exiting on a negative input\n")
                sys.stderr.flush()
                os._exit(3)
            if x[0] == 2:
                self.note("executing", "")
                time.sleep(1000)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out

    def finalize(self):
        self.note("finalized-%d" % os.getpid(), "")
        if self.hang:
            time.sleep(1000)
