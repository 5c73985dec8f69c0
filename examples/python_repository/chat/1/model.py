# A decoupled stand-in for an LLM: it answers "You said: <text>", where
# <text> is the last user turn of a ChatML prompt (what the chat template
# beside config.pbtxt renders), or the whole prompt otherwise. Each word
# of the answer is a "token": with stream true each goes out as a response
# of its own (deltas, as Triton's vLLM backend streams), otherwise the
# answer goes out whole; sampling_parameters' max_tokens cuts it short.
# Asked (return_num_input_tokens, return_num_output_tokens), it reports
# the prompt's words and each response's as token counts, as Triton's vLLM
# backend reports its tokens. A client that goes away stops the generation
# (request.is_cancelled()).
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def optional(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    if t is None:
        return default
    v = t.as_numpy().reshape(-1)[0]
    return v.decode("utf-8") if isinstance(v, bytes) else v


def last_user_turn(prompt):
    start = prompt.rfind("<|im_start|>user\n")
    if start < 0:
        return prompt.strip()
    text = prompt[start + len("<|im_start|>user\n"):]
    return text.split("<|im_end|>", 1)[0].strip()


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = optional(request, "text_input", "")
            stream = bool(optional(request, "stream", False))
            raw = optional(request, "sampling_parameters", None)
            sampling = json.loads(raw) if raw else {}
            counts = bool(optional(request, "return_num_input_tokens", False)) and bool(optional(request, "return_num_output_tokens", False))
            words = ("You said: " + last_user_turn(prompt)).split(" ")
            if "max_tokens" in sampling:
                words = words[:int(sampling["max_tokens"])]
            pieces = [[w if i == 0 else " " + w] for i, w in enumerate(words)]
            if not stream:
                pieces = [[w for p in pieces for w in p]]
            for piece in pieces:
                if request.is_cancelled():
                    break
                text = np.array(["".join(piece).encode("utf-8")], dtype=np.object_)
                out = [pb_utils.Tensor("text_output", text)]
                if counts:
                    out.append(pb_utils.Tensor("num_input_tokens", np.array([len(prompt.split())], dtype=np.uint32)))
                    out.append(pb_utils.Tensor("num_output_tokens", np.array([len(piece)], dtype=np.uint32)))
                sender.send(pb_utils.InferenceResponse(out))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
