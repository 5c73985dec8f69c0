import os
import subprocess
import sys
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # A child process that inherits the worker's stdout and stderr and
        # outlives it unless its whole process group is killed. Its last
        # argument is this file's folder, so a test can find it by its
        # command line.
        self.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", os.path.dirname(os.path.abspath(__file__))])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]

    def finalize(self):
        time.sleep(1000)
