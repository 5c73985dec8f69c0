# A model for forked instances (FORK_INSTANCES): initialize builds
# weights_mb MiB of numpy arrays (1 by default) and notes <marker>/init-<pid>;
# OUT is IN * 2 + a sum over the weights, PID the serving worker's pid. An
# input of -2 notes <marker>/executing-<pid> and sleeps; finalize notes
# <marker>/finalized-<pid>; -3 makes the worker exit with status 3 after a
# line on stderr. With the parameter threads "yes", initialize
# leaves a thread running; with fail "yes" it raises.
import json
import os
import sys
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.params = {k: v.get("string_value", "") for k, v in params.items()}
        self.marker = self.params.get("marker", "")
        if self.params.get("fail") == "yes":
            raise Exception("refusing to initialize")
        n = int(self.params.get("weights_mb", "1")) * (1 << 20) // 8
        self.weights = np.arange(n, dtype=np.float64) % 7
        self.total = float(self.weights[:1000].sum())
        if self.params.get("threads") == "yes":
            threading.Thread(target=time.sleep, args=(1000,), name="model-sleeper", daemon=True).start()
        self.note("init-%d" % os.getpid(), args["model_instance_name"])

    def note(self, name, text=""):
        if self.marker:
            with open(os.path.join(self.marker, name), "w") as f:
                f.write(text)

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] == -3:
                sys.stderr.write("forked: exiting on -3\n")
                sys.stderr.flush()
                os._exit(3)
            if x[0] == -2:
                self.note("executing-%d" % os.getpid())
                time.sleep(1000)
            y = (x * 2 + self.total).astype(np.float32)
            pid = np.array([os.getpid()], dtype=np.int64)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y), pb_utils.Tensor("PID", pid)]))
        return out

    def finalize(self):
        self.note("finalized-%d" % os.getpid())
