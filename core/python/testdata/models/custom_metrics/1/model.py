import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        requests = pb_utils.MetricFamily("custom_requests_total", "Requests seen by the model", pb_utils.MetricFamily.COUNTER)
        last = pb_utils.MetricFamily("custom_last_input", "The last input", pb_utils.MetricFamily.GAUGE)
        sizes = pb_utils.MetricFamily("custom_input_value", "Inputs seen", pb_utils.MetricFamily.HISTOGRAM)
        labels = {"model": args["model_name"]}
        self.requests = requests.Metric(labels=labels)
        self.last = last.Metric(labels=labels)
        self.sizes = sizes.Metric(labels=labels, buckets=[1.0, 10.0])
        # A family of another backend's name (TensorRT-LLM's KV cache, which
        # ORCA load reports read) is allowed; one of the server's own is not.
        kv = pb_utils.MetricFamily("nv_trt_llm_kv_cache_block_metrics", "KV cache blocks", pb_utils.MetricFamily.GAUGE)
        for kind, value in (("tokens_per", 64), ("used", 2), ("max", 4)):
            kv.Metric(labels={"kv_cache_block_type": kind}).set(value)
        refused = pb_utils.MetricFamily("custom_refused", "Server families refused", pb_utils.MetricFamily.GAUGE).Metric()
        try:
            pb_utils.MetricFamily("nv_inference_count", "clash", pb_utils.MetricFamily.COUNTER)
        except pb_utils.TritonModelException as e:
            refused.set(1 if "taken by the server" in str(e) else 2)

    def execute(self, requests):
        out = []
        for request in requests:
            x = float(request.inputs()[0].as_numpy()[0])
            self.requests.increment(1)
            self.last.set(x)
            self.sizes.observe(x)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.requests.value()]))]))
        return out
