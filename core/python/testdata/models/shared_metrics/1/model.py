# Two instances share one counter: each, in turn (a lock file in the
# marker folder), creates it and adds 1, and writes to <marker>/<pid>
# "creator" when it found the counter at 0. Two gauges have label sets that
# read alike as text: {a: "b,c=d"} and {a: "b", c: "d"}.
import fcntl
import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        marker = params["marker"]["string_value"]
        with open(os.path.join(marker, "lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            shared = pb_utils.MetricFamily("shared_total", "Shared by the instances", pb_utils.MetricFamily.COUNTER)
            self.shared = shared.Metric(labels={"model": args["model_name"]})
            role = "creator" if self.shared.value() == 0 else "sharer"
            self.shared.increment(1)
            with open(os.path.join(marker, str(os.getpid())), "w") as f:
                f.write(role)
        sets = pb_utils.MetricFamily("label_sets", "Label sets alike as text", pb_utils.MetricFamily.GAUGE)
        sets.Metric(labels={"a": "b,c=d"}).set(1)
        sets.Metric(labels={"a": "b", "c": "d"}).set(2)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
