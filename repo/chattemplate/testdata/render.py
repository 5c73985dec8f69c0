"""Golden chat-template renders for repo/chattemplate (see README.md).

Renders every templates/*.jinja with every context of contexts.json the way
transformers does (huggingface/transformers
src/transformers/utils/chat_template_utils.py: _compile_jinja_template,
render_jinja_template), after the request shaping vLLM applies first
(vllm-project/vllm vllm/entrypoints/chat_utils.py: text parts joined with
"\\n", tool-call arguments strings parsed), with strftime_now's clock fixed.
"""
import datetime, glob, json, os, sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)


class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def shape(messages):
    for m in messages:
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"])
        for c in m.get("tool_calls") or []:
            a = c.get("function", {}).get("arguments")
            if isinstance(a, str):
                try:
                    parsed = json.loads(a)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    c["function"]["arguments"] = parsed
    return messages


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[AssistantTracker, jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: NOW.strftime(f)

here = os.path.dirname(os.path.abspath(__file__))
spec = json.load(open(os.path.join(here, "contexts.json"), encoding="utf-8"))
out = {}
for path in sorted(glob.glob(os.path.join(here, "templates", "*.jinja"))):
    name = os.path.basename(path)
    tpl = env.from_string(open(path, encoding="utf-8").read())
    for cname, c in spec["contexts"].items():
        ctx = dict(c.get("chat_template_kwargs") or {})
        ctx.update(spec["special"])
        ctx.update(messages=shape(json.loads(json.dumps(c["messages"]))), tools=c.get("tools"),
                   documents=c.get("documents"), add_generation_prompt=c["add_generation_prompt"])
        try:
            out[name + ":" + cname] = {"ok": tpl.render(**ctx)}
        except Exception as e:  # the Go side only checks that it fails too
            out[name + ":" + cname] = {"err": type(e).__name__ + ": " + str(e)}
with open(os.path.join(here, "golden.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
    f.write("\n")
