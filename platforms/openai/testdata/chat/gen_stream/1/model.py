# A decoupled stand-in for an LLM. Its "generated text" is the prompt in
# angle brackets, cut into pieces of 4 characters, one "token" each; with
# sampling_parameters' max_tokens it stops after that many pieces. When
# the stream input is true it sends each piece as a response of its own
# (deltas, as Triton's vLLM backend streams), otherwise the whole text in
# one response. With return_num_input_tokens and return_num_output_tokens
# it reports, as the vLLM backend does, the prompt's "tokens" (its words)
# and each response's pieces. Prompts that hold a command word:
#   SHOW_PARAMS   the text is a JSON object of the inputs received;
#   FAIL_AFTER_2  two pieces, then an error response;
#   FAIL_NOW      an error response at once;
#   SLOW          a piece every 20 ms for up to 20 s, stopping once the
#                 request is cancelled, which leaves a file "cancelled"
#                 beside the model;
#   FLOOD         pieces of 64 KiB as fast as it can, up to 256 MiB, with
#                 SLOW's cancellation.
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def outputs(s, prompt_tokens, pieces):
    out = [pb_utils.Tensor("text_output", np.array([s.encode("utf-8")], dtype=np.object_))]
    if prompt_tokens is not None:
        out.append(pb_utils.Tensor("num_input_tokens", np.array([prompt_tokens], dtype=np.uint32)))
        out.append(pb_utils.Tensor("num_output_tokens", np.array([pieces], dtype=np.uint32)))
    return out


def optional(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    if t is None:
        return default
    v = t.as_numpy().reshape(-1)[0]
    return v.decode("utf-8") if isinstance(v, bytes) else v


class TritonPythonModel:
    def initialize(self, args):
        self.marker = os.path.join(args["model_repository"], "cancelled")

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.generate, args=(request,), daemon=True).start()
        return None

    def generate(self, request):
        sender = request.get_response_sender()
        prompt = optional(request, "text_input", "")
        stream = bool(optional(request, "stream", False))
        sampling_raw = optional(request, "sampling_parameters", None)
        exclude = bool(optional(request, "exclude_input_in_output", True))
        sampling = json.loads(sampling_raw) if sampling_raw is not None else None
        counts = bool(optional(request, "return_num_input_tokens", False)) and bool(optional(request, "return_num_output_tokens", False))
        n_in = len(prompt.split()) if counts else None
        if "SHOW_PARAMS" in prompt:
            text = json.dumps({"stream": stream, "exclude_input_in_output": exclude, "sampling_parameters": sampling}, sort_keys=True)
        else:
            text = "<" + prompt + ">"
        pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
        if sampling and "max_tokens" in sampling:
            pieces = pieces[:int(sampling["max_tokens"])]
        if not exclude:
            pieces[0:0] = [prompt]
        if "SLOW" in prompt or "FLOOD" in prompt:
            flood = "FLOOD" in prompt
            piece, wait, sent = ("x" * 65536, 0, 0) if flood else ("tick ", 0.02, 0)
            deadline = time.time() + 20
            try:
                while time.time() < deadline:
                    if request.is_cancelled():
                        open(self.marker, "w").close()
                        # The server may have closed the sender already.
                        sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)),
                                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        return
                    if flood and sent >= 4096:
                        break
                    sender.send(pb_utils.InferenceResponse(outputs(piece, n_in, 1)))
                    sent += 1
                    time.sleep(wait)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except pb_utils.TritonModelException:
                # A send the server refused: the request has ended, and its
                # cancellation follows.
                for _ in range(100):
                    if request.is_cancelled():
                        open(self.marker, "w").close()
                        break
                    time.sleep(0.02)
            return
        if "FAIL_AFTER_2" in prompt or "FAIL_NOW" in prompt:
            for p in pieces[:2] if "FAIL_AFTER_2" in prompt else []:
                sender.send(pb_utils.InferenceResponse(outputs(p, n_in, 1)))
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the model broke down")),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        if stream:
            for p in pieces:
                sender.send(pb_utils.InferenceResponse(outputs(p, n_in, 1)))
        else:
            sender.send(pb_utils.InferenceResponse(outputs("".join(pieces), n_in, len(pieces))))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
